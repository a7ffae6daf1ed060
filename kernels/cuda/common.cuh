#pragma once
// Device helpers for the .cu files of kernels/cuda (not for host-compiled code).
// Reductions here combine values in a fixed order (xor butterflies within a warp, then
// warp results in warp order), so they are deterministic for a fixed launch shape.
#include <algorithm>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor::cuda_detail {

constexpr int kWarpSize = 32;

__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }

/// A parameter-gradient element (f32, or bf16 under optim.grad_dtype bf16) as f32.
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return to_float(x); }
/// The inverse: f32 stored as such, bf16 rounded to nearest even.
__device__ __forceinline__ void store_narrowed(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_narrowed(bf16* p, float x) { *p = to_bf16(x); }

/// `*grad += delta` for a parameter gradient of either type (types.hpp): f32 exactly as
/// written; bf16 widened, added in f32 and rounded to nearest even once.
__device__ __forceinline__ void add_to_grad(float* grad, float delta) { *grad += delta; }
__device__ __forceinline__ void add_to_grad(bf16* grad, float delta) {
  *grad = to_bf16(to_float(*grad) + delta);
}

struct AddOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, AddOp{}); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, MaxOp{}); }

/// op over the block (identity: what op leaves unchanged); every thread gets the result.
/// `scratch` holds >= 32 floats.
/// REQUIRES: blockDim.x a multiple of 32; called by every thread of the block.
template <class Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, float identity, Op op) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_reduce(v, op);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  return warp_reduce(v, op);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, 0.0f, AddOp{});
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, -INFINITY, MaxOp{});
}

inline unsigned ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

/// Blocks of `threads` for a grid-stride loop over n elements: one per `threads` elements,
/// at most `cap` (the loop covers the rest).
inline unsigned grid_stride_blocks(std::int64_t n, int threads, std::int64_t cap = 65535) {
  return static_cast<unsigned>(std::min<std::int64_t>(ceil_div(n, threads), cap));
}

/// Throws std::invalid_argument("<what>: <message>") unless `ok`.
inline void require(bool ok, const char* what, const std::string& message) {
  if (!ok) throw std::invalid_argument(std::string(what) + ": " + message);
}

}  // namespace conveyor::cuda_detail
