#pragma once
// The tile kernels that cast a (rows, cols) bf16 tensor to FP8 codes, its transpose, and
// its amax in one pass, written once over where the values come from (a Source):
//   a tensor in memory (fp8_cast.cu), or an element-wise kernel's output computed in the
//   same pass and stored as bf16 on the way (fp8_fused_cast.cu: issue 43 item 2, the cast
//   fused into the kernel that produces the data).
// A Source provides, for the element (r, c) or the 8 elements (r, c .. c + 7):
//   __device__ float value(int r, int c) const;         the bf16 value, as a float
//   __device__ void values8(int r, int c, unsigned w[4]) const;  8 bf16, 2 per word, low first
// and stores what it produces itself. What must hold: the codes are
// __nv_cvt_float_to_fp8(v * scale) of the bf16 value v (saturating RNE), in both copies;
// the amax is max |v| as an order-free integer max of the float bits (NaN above infinity),
// so every Source's codes and amax equal those of its bf16 output cast on its own.
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace conveyor::cuda_detail {

/// max over the block of each thread's m, then one atomicMax per block (not per warp: a
/// 16 M-element tensor would otherwise queue half a million atomics on one address).
/// REQUIRES: blockDim a multiple of 32, one-dimensional; every thread calls it.
__device__ __forceinline__ void block_amax(unsigned* amax_bits, unsigned m) {
  __shared__ unsigned warp_max[32];
  for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < int(blockDim.x / 32) ? warp_max[lane] : 0u;
    for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if (lane == 0) atomicMax(amax_bits, m);
  }
}

/// The two bf16 of a 32-bit word as floats (bf16 is a float's upper half: exact).
__device__ __forceinline__ float low_bf16(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_bf16(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

/// A float rounded to bf16 (nearest even), its 16 bits.
__device__ __forceinline__ unsigned bf16_bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/// 32 x 32 tiles through shared memory (a row of padding against bank conflicts): reads of
/// the source and writes of out_t both walk contiguous rows. Block (32, 8), each thread 4
/// rows. Any shape.
constexpr int kCastTile = 32, kCastTileRows = 8;
template <class Source>
__global__ void cast_transpose_tile_kernel(Source src, std::uint8_t* out, std::uint8_t* out_t,
                                           int rows, int cols, const float* scale,
                                           __nv_fp8_interpretation_t kind, unsigned* amax_bits) {
  __shared__ std::uint8_t tile[kCastTile][kCastTile + 1];
  const float s = scale ? *scale : 1.0f;
  const int c0 = blockIdx.x * kCastTile, r0 = blockIdx.y * kCastTile;
  unsigned m = 0;
  for (int i = threadIdx.y; i < kCastTile; i += kCastTileRows) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const float v = src.value(r, c);
      m = max(m, __float_as_uint(v) & 0x7fffffffu);
      const std::uint8_t q = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, kind);
      if (out) out[std::int64_t{r} * cols + c] = q;
      tile[i][threadIdx.x] = q;
    }
  }
  if (amax_bits) {  // uniform over the block
    for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, m);
  }
  if (!out_t) return;  // uniform over the block
  __syncthreads();
  for (int i = threadIdx.y; i < kCastTile; i += kCastTileRows) {
    const int c = c0 + i, r = r0 + threadIdx.x;  // out_t row c, column r
    if (c < cols && r < rows) out_t[std::int64_t{c} * rows + r] = tile[threadIdx.x][i];
  }
}

/// The same on 64 x 64 tiles, 8 values read (16 bytes of bf16) and 8 codes (8 bytes)
/// written per thread and vector; the same codes and amax bits. Block: 256 threads, 8 per
/// 64-wide row segment, 32 rows per pass. REQUIRES: rows and cols multiples of 8, the
/// source's memory 16-byte aligned, out and out_t 8-byte aligned (a vector is then wholly
/// inside or outside); with neither scale nor codes, only the source's stores and the amax.
constexpr int kCastVecTile = 64, kCastVecThreads = 256;
template <class Source>
__global__ void cast_transpose_vec_kernel(Source src, std::uint8_t* out, std::uint8_t* out_t,
                                          int rows, int cols, const float* scale,
                                          __nv_fp8_interpretation_t kind, unsigned* amax_bits) {
  // Rows of 68 bytes (17 words): the transposed reads of 8 rows 8 apart fall on 2 banks'
  // worth of conflict rather than 4.
  __shared__ std::uint32_t tile[kCastVecTile][kCastVecTile / 4 + 1];
  const float s = scale ? *scale : 1.0f;
  const bool codes = out || out_t;
  const int c0 = blockIdx.x * kCastVecTile, r0 = blockIdx.y * kCastVecTile;
  const int seg = threadIdx.x % 8, row = threadIdx.x / 8;
  unsigned m = 0;
  for (int i = row; i < kCastVecTile; i += kCastVecThreads / 8) {
    const int r = r0 + i, c = c0 + seg * 8;
    if (r >= rows || c >= cols) continue;
    unsigned words[4];
    src.values8(r, c, words);
    std::uint32_t packed[2] = {0, 0};
    for (int j = 0; j < 4; ++j) {
      const unsigned w = words[j];
      m = max(m, max((w << 16) & 0x7fffffffu, w & 0x7fff0000u));
      if (!codes) continue;
      const std::uint32_t lo = __nv_cvt_float_to_fp8(low_bf16(w) * s, __NV_SATFINITE, kind);
      const std::uint32_t hi = __nv_cvt_float_to_fp8(high_bf16(w) * s, __NV_SATFINITE, kind);
      packed[j / 2] |= (lo | hi << 8) << (16 * (j % 2));
    }
    if (!codes) continue;
    if (out) *reinterpret_cast<uint2*>(out + std::int64_t{r} * cols + c) = make_uint2(packed[0], packed[1]);
    tile[i][seg * 2] = packed[0];
    tile[i][seg * 2 + 1] = packed[1];
  }
  if (amax_bits) block_amax(amax_bits, m);  // uniform over the block
  if (!out_t) return;                       // uniform over the block
  __syncthreads();
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(tile);
  constexpr int kRowBytes = 4 * (kCastVecTile / 4 + 1);
  for (int i = row; i < kCastVecTile; i += kCastVecThreads / 8) {
    const int c = c0 + i, r = r0 + seg * 8;  // out_t row c, columns r .. r + 7
    if (c >= cols || r >= rows) continue;
    std::uint32_t packed[2] = {0, 0};
    for (int k = 0; k < 8; ++k)
      packed[k / 4] |= std::uint32_t{bytes[(seg * 8 + k) * kRowBytes + i]} << (8 * (k % 4));
    *reinterpret_cast<uint2*>(out_t + std::int64_t{c} * rows + r) = make_uint2(packed[0], packed[1]);
  }
}

inline bool cast_aligned(const void* p, std::uintptr_t bytes) {  // null counts as aligned
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

/// Launches the vector kernel when `vectorizable` (the caller's alignment and shape check,
/// with rows and cols multiples of 8 and out, out_t 8-byte aligned checked here), else the
/// scalar one. amax_bits, when given, must be zeroed before (the kernels atomicMax into it).
template <class Source>
void launch_cast_transpose_tiles(const Source& src, bool vectorizable, std::uint8_t* out,
                                 std::uint8_t* out_t, int rows, int cols, const float* scale,
                                 __nv_fp8_interpretation_t kind, unsigned* amax_bits,
                                 cudaStream_t stream) {
  if (vectorizable && rows % 8 == 0 && cols % 8 == 0 && cast_aligned(out, 8) &&
      cast_aligned(out_t, 8)) {
    const dim3 grid(ceil_div(cols, kCastVecTile), ceil_div(rows, kCastVecTile));
    cast_transpose_vec_kernel<<<grid, kCastVecThreads, 0, stream>>>(src, out, out_t, rows, cols,
                                                                    scale, kind, amax_bits);
  } else {
    const dim3 grid(ceil_div(cols, kCastTile), ceil_div(rows, kCastTile)),
        block(kCastTile, kCastTileRows);
    cast_transpose_tile_kernel<<<grid, block, 0, stream>>>(src, out, out_t, rows, cols, scale,
                                                           kind, amax_bits);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor::cuda_detail
