// Invariant: outputs are written with =.
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8_cast.hpp"
#include "kernels/cpu/fp8_scaling.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;
using cpu::kMinAmax;

__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(bf16 v) { return to_float(v); }

template <class T>
__global__ void cast_to_fp8_kernel(std::uint8_t* out, const T* x, std::int64_t n,
                                   const float* scale, __nv_fp8_interpretation_t kind) {
  const float s = *scale;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = __nv_cvt_float_to_fp8(as_float(x[i]) * s, __NV_SATFINITE, kind);
}

// max |x| as the bits of a non-negative float: for non-negative floats (and NaN, whose bits
// exceed infinity's once the sign is cleared) the integer order is the numeric order, so an
// integer atomicMax is exact and order-free.
__global__ void amax_kernel(unsigned* amax_bits, const bf16* x, std::int64_t n) {
  unsigned m = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    m = max(m, __float_as_uint(to_float(x[i])) & 0x7fffffffu);
  for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, m);
}

// 32 x 32 tiles through shared memory (a row of padding against bank conflicts): reads of x
// and writes of out_t both walk contiguous rows. Block (32, 8), each thread 4 rows.
constexpr int kTile = 32, kTileRows = 8;
// amax_bits, when not null, gets max |x| of the tile as fp8_amax's order-free integer max.
__global__ void cast_transpose_kernel(std::uint8_t* out, std::uint8_t* out_t, const bf16* x,
                                      int rows, int cols, const float* scale,
                                      __nv_fp8_interpretation_t kind, unsigned* amax_bits) {
  __shared__ std::uint8_t tile[kTile][kTile + 1];
  const float s = *scale;
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  unsigned m = 0;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const std::int64_t at = std::int64_t{r} * cols + c;
      const float v = to_float(x[at]);
      m = max(m, __float_as_uint(v) & 0x7fffffffu);
      const std::uint8_t q = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, kind);
      if (out) out[at] = q;
      tile[i][threadIdx.x] = q;
    }
  }
  if (amax_bits) {  // uniform over the block
    for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, m);
  }
  if (!out_t) return;  // uniform over the block
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int c = c0 + i, r = r0 + threadIdx.x;  // out_t row c, column r
    if (c < cols && r < rows) out_t[std::int64_t{c} * rows + r] = tile[threadIdx.x][i];
  }
}

// The two bf16 of a 32-bit word as floats (bf16 is a float's upper half: exact).
__device__ __forceinline__ float low_bf16(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_bf16(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// max over the block of each thread's m, then one atomicMax per block (not per warp: a
// 16 M-element tensor would otherwise queue half a million atomics on one address).
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

// amax_kernel over 8 bf16 (16 bytes) per load. REQUIRES: x 16-byte aligned; blockDim a
// multiple of 32, one-dimensional.
__global__ void amax_vec8_kernel(unsigned* amax_bits, const uint4* x, std::int64_t n8) {
  unsigned m = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n8;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const uint4 v = x[i];
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
    for (const unsigned w : words) m = max(m, max((w << 16) & 0x7fffffffu, w & 0x7fff0000u));
  }
  block_amax(amax_bits, m);
}

// cast_transpose_kernel on 64 x 64 tiles, 8 bf16 (16 bytes) read and 8 codes (8 bytes)
// written per thread and vector; the same codes and amax bits. Block: 256 threads, 8 per
// 64-wide row segment, 32 rows per pass. REQUIRES: rows and cols multiples of 8, x 16-byte
// aligned, out and out_t 8-byte aligned (a vector is then wholly inside or outside).
constexpr int kVecTile = 64, kVecThreads = 256;
__global__ void cast_transpose_vec_kernel(std::uint8_t* out, std::uint8_t* out_t, const bf16* x,
                                          int rows, int cols, const float* scale,
                                          __nv_fp8_interpretation_t kind, unsigned* amax_bits) {
  // Rows of 68 bytes (17 words): the transposed reads of 8 rows 8 apart fall on 2 banks'
  // worth of conflict rather than 4.
  __shared__ std::uint32_t tile[kVecTile][kVecTile / 4 + 1];
  const float s = *scale;
  const int c0 = blockIdx.x * kVecTile, r0 = blockIdx.y * kVecTile;
  const int seg = threadIdx.x % 8, row = threadIdx.x / 8;
  unsigned m = 0;
  for (int i = row; i < kVecTile; i += kVecThreads / 8) {
    const int r = r0 + i, c = c0 + seg * 8;
    if (r >= rows || c >= cols) continue;
    const std::int64_t at = std::int64_t{r} * cols + c;
    const uint4 v = *reinterpret_cast<const uint4*>(x + at);
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
    std::uint32_t packed[2] = {0, 0};
    for (int j = 0; j < 4; ++j) {
      const unsigned w = words[j];
      m = max(m, max((w << 16) & 0x7fffffffu, w & 0x7fff0000u));
      const std::uint32_t lo = __nv_cvt_float_to_fp8(low_bf16(w) * s, __NV_SATFINITE, kind);
      const std::uint32_t hi = __nv_cvt_float_to_fp8(high_bf16(w) * s, __NV_SATFINITE, kind);
      packed[j / 2] |= (lo | hi << 8) << (16 * (j % 2));
    }
    if (out) *reinterpret_cast<uint2*>(out + at) = make_uint2(packed[0], packed[1]);
    tile[i][seg * 2] = packed[0];
    tile[i][seg * 2 + 1] = packed[1];
  }
  if (amax_bits) block_amax(amax_bits, m);  // uniform over the block
  if (!out_t) return;                       // uniform over the block
  __syncthreads();
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(tile);
  constexpr int kRowBytes = 4 * (kVecTile / 4 + 1);
  for (int i = row; i < kVecTile; i += kVecThreads / 8) {
    const int c = c0 + i, r = r0 + seg * 8;  // out_t row c, columns r .. r + 7
    if (c >= cols || r >= rows) continue;
    std::uint32_t packed[2] = {0, 0};
    for (int k = 0; k < 8; ++k)
      packed[k / 4] |= std::uint32_t{bytes[(seg * 8 + k) * kRowBytes + i]} << (8 * (k % 4));
    *reinterpret_cast<uint2*>(out_t + std::int64_t{c} * rows + r) = make_uint2(packed[0], packed[1]);
  }
}

__global__ void scale_from_amax_kernel(float* scale, float* dequant, const float* amax,
                                       float max_finite) {
  const float a = *amax;
  if (!isfinite(a)) {
    *scale = 1.0f;
    *dequant = __int_as_float(0x7fc00000);  // quiet NaN
    return;
  }
  const float s = max_finite / fmaxf(a, kMinAmax);
  *scale = s;
  *dequant = 1.0f / s;
}

constexpr int kThreads = 256;
// amax_vec8_kernel's grid: enough blocks to fill the GPU, few enough atomics.
constexpr std::int64_t kAmaxBlocks = 1024;

bool aligned(const void* p, std::uintptr_t bytes) {  // null counts as aligned (not written)
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

template <class T>
void launch_cast(std::uint8_t* out, const T* x, std::int64_t n, const float* scale, Fp8Kind kind,
                 cudaStream_t stream) {
  require(n >= 0, "cast_to_fp8", "negative n " + std::to_string(n));
  if (n == 0) return;
  cast_to_fp8_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      out, x, n, scale, kind == Fp8Kind::e4m3 ? __NV_E4M3 : __NV_E5M2);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void cast_to_fp8(std::uint8_t* out, const float* x, std::int64_t n, const float* scale,
                 Fp8Kind kind, cudaStream_t stream) {
  launch_cast(out, x, n, scale, kind, stream);
}

void cast_to_fp8(std::uint8_t* out, const bf16* x, std::int64_t n, const float* scale,
                 Fp8Kind kind, cudaStream_t stream) {
  launch_cast(out, x, n, scale, kind, stream);
}

namespace {

void launch_cast_transpose(std::uint8_t* out, std::uint8_t* out_t, const bf16* x, int rows,
                           int cols, const float* scale, Fp8Kind kind, unsigned* amax_bits,
                           cudaStream_t stream) {
  require(rows >= 0 && cols >= 0, "cast_transpose_to_fp8",
          "negative shape " + std::to_string(rows) + " x " + std::to_string(cols));
  require(ceil_div(rows, kTile) <= 65535, "cast_transpose_to_fp8",
          "rows " + std::to_string(rows) + " beyond the grid");
  if (rows == 0 || cols == 0 || (!out && !out_t)) return;
  const auto format = kind == Fp8Kind::e4m3 ? __NV_E4M3 : __NV_E5M2;
  if (rows % 8 == 0 && cols % 8 == 0 && aligned(x, 16) && aligned(out, 8) && aligned(out_t, 8)) {
    const dim3 grid(ceil_div(cols, kVecTile), ceil_div(rows, kVecTile));
    cast_transpose_vec_kernel<<<grid, kVecThreads, 0, stream>>>(out, out_t, x, rows, cols, scale,
                                                                format, amax_bits);
  } else {
    const dim3 grid(ceil_div(cols, kTile), ceil_div(rows, kTile)), block(kTile, kTileRows);
    cast_transpose_kernel<<<grid, block, 0, stream>>>(out, out_t, x, rows, cols, scale, format,
                                                      amax_bits);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, const bf16* x, int rows,
                           int cols, const float* scale, Fp8Kind kind, cudaStream_t stream) {
  launch_cast_transpose(out, out_t, x, rows, cols, scale, kind, nullptr, stream);
}

void cast_transpose_to_fp8_with_amax(std::uint8_t* out, std::uint8_t* out_t, const bf16* x,
                                     int rows, int cols, const float* scale, float* amax,
                                     Fp8Kind kind, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  launch_cast_transpose(out, out_t, x, rows, cols, scale, kind, reinterpret_cast<unsigned*>(amax),
                        stream);
}

void fp8_amax(float* amax, const bf16* x, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "fp8_amax", "negative n " + std::to_string(n));
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (n == 0) return;
  auto* bits = reinterpret_cast<unsigned*>(amax);
  if (n % 8 == 0 && aligned(x, 16))
    amax_vec8_kernel<<<grid_stride_blocks(n / 8, kThreads, kAmaxBlocks), kThreads, 0, stream>>>(
        bits, reinterpret_cast<const uint4*>(x), n / 8);
  else
    amax_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(bits, x, n);
  CUDA_CHECK_LAUNCH();
}

void fp8_scale_from_amax(float* scale, float* dequant, const float* amax, Fp8Kind kind,
                         cudaStream_t stream) {
  scale_from_amax_kernel<<<1, 1, 0, stream>>>(scale, dequant, amax,
                                              static_cast<float>(fp8_format(kind).max_finite));
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
