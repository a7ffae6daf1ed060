// Invariant: outputs are written with =.
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8_cast.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

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
__global__ void cast_transpose_kernel(std::uint8_t* out, std::uint8_t* out_t, const bf16* x,
                                      int rows, int cols, const float* scale,
                                      __nv_fp8_interpretation_t kind) {
  __shared__ std::uint8_t tile[kTile][kTile + 1];
  const float s = *scale;
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const std::int64_t at = std::int64_t{r} * cols + c;
      const std::uint8_t q = __nv_cvt_float_to_fp8(to_float(x[at]) * s, __NV_SATFINITE, kind);
      if (out) out[at] = q;
      tile[i][threadIdx.x] = q;
    }
  }
  if (!out_t) return;  // uniform over the block
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int c = c0 + i, r = r0 + threadIdx.x;  // out_t row c, column r
    if (c < cols && r < rows) out_t[std::int64_t{c} * rows + r] = tile[threadIdx.x][i];
  }
}

constexpr int kThreads = 256;

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

void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, const bf16* x, int rows,
                           int cols, const float* scale, Fp8Kind kind, cudaStream_t stream) {
  require(rows >= 0 && cols >= 0, "cast_transpose_to_fp8",
          "negative shape " + std::to_string(rows) + " x " + std::to_string(cols));
  require(ceil_div(rows, kTile) <= 65535, "cast_transpose_to_fp8",
          "rows " + std::to_string(rows) + " beyond the grid");
  if (rows == 0 || cols == 0 || (!out && !out_t)) return;
  const dim3 grid(ceil_div(cols, kTile), ceil_div(rows, kTile)), block(kTile, kTileRows);
  cast_transpose_kernel<<<grid, block, 0, stream>>>(out, out_t, x, rows, cols, scale,
                                                    kind == Fp8Kind::e4m3 ? __NV_E4M3 : __NV_E5M2);
  CUDA_CHECK_LAUNCH();
}

void fp8_amax(float* amax, const bf16* x, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "fp8_amax", "negative n " + std::to_string(n));
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (n == 0) return;
  amax_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      reinterpret_cast<unsigned*>(amax), x, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
