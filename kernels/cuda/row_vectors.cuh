#pragma once
// Rows held as 16-byte vectors by one warp (layernorm.cu, rmsnorm.cu): lane l of the row's
// warp holds vectors l, l + 32, ... (kV of them), so a warp reads 512 contiguous bytes per
// step and a row of C = kV * 256 bf16 is read from global memory once.
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/common.cuh"

namespace conveyor::cuda_detail {

/// Element offset of lane `lane`'s vector v within a row.
__device__ __forceinline__ int vec_offset(int v, int lane) { return (v * kWarpSize + lane) * kVec; }

/// Calls f(std::integral_constant<int, kV>) when C = kV * 256 for a supported kV (every
/// width that is a multiple of 256 up to 4096 but 5, 7, 9–11, 13–15 × 256) and every
/// pointer is 16-byte aligned; returns false (the caller uses its scalar kernel) otherwise.
template <class F>
bool with_vec_width(int C, std::initializer_list<const void*> ptrs, F&& f) {
  if (C % (kVec * kWarpSize) != 0) return false;
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  switch (C / (kVec * kWarpSize)) {
    case 1: f(std::integral_constant<int, 1>{}); return true;
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 3: f(std::integral_constant<int, 3>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 6: f(std::integral_constant<int, 6>{}); return true;
    case 8: f(std::integral_constant<int, 8>{}); return true;
    case 12: f(std::integral_constant<int, 12>{}); return true;
    case 16: f(std::integral_constant<int, 16>{}); return true;
    default: return false;
  }
}

/// Fills x with lane `lane`'s kV vectors of the row at `base`: a's, or with a residual
/// (non-null) bf16(a + b), stored into residual and held as it was rounded (what a norm
/// after a residual add normalises). Every load is issued before the first add.
template <int kV>
__device__ __forceinline__ void load_row_or_residual(uint4 (&x)[kV], bf16* residual, const bf16* a,
                                                     const bf16* b, std::int64_t base, int lane) {
  if (residual) {
    uint4 y[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      x[v] = load_raw(a + base + vec_offset(v, lane));
      y[v] = load_raw(b + base + vec_offset(v, lane));
    }
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      float s[kVec], t[kVec];
      unpack8(s, x[v]);
      unpack8(t, y[v]);
#pragma unroll
      for (int k = 0; k < kVec; ++k) s[k] += t[k];
      x[v] = pack8(s);
      store_raw(residual + base + vec_offset(v, lane), x[v]);
    }
  } else {
#pragma unroll
    for (int v = 0; v < kV; ++v) x[v] = load_raw(a + base + vec_offset(v, lane));
  }
}

}  // namespace conveyor::cuda_detail
