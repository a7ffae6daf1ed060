#pragma once
// Eight bf16 as one 16-byte vector (a uint4): the unit of the row-wise kernels' loads and
// stores (layernorm.cu, cross_entropy.cu). A row kept packed in registers takes 4
// registers per 8 values, half of what floats take; unpacking gives the same floats every
// time, so kernels may unpack a vector once per use instead of holding floats.
// REQUIRES of every pointer: 16-byte aligned.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/types.hpp"

namespace conveyor::cuda_detail {

constexpr int kVec = 8;  // bf16 per 16-byte vector

__device__ __forceinline__ uint4 load_raw(const bf16* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_raw(bf16* p, uint4 raw) {
  *reinterpret_cast<uint4*>(p) = raw;
}

__device__ __forceinline__ void unpack8(float (&f)[kVec], uint4 raw) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < kVec / 2; ++k) {
    const float2 v = __bfloat1622float2(h[k]);
    f[2 * k] = v.x;
    f[2 * k + 1] = v.y;
  }
}

/// Rounds each value to bf16, to nearest even.
__device__ __forceinline__ uint4 pack8(const float (&f)[kVec]) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < kVec / 2; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  return raw;
}

__device__ __forceinline__ void load8(float (&f)[kVec], const bf16* p) { unpack8(f, load_raw(p)); }
__device__ __forceinline__ void store8(bf16* p, const float (&f)[kVec]) {
  store_raw(p, pack8(f));
}

/// True when p is 16-byte aligned (null counts as aligned: nothing is accessed through it).
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace conveyor::cuda_detail
