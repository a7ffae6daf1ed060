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
  const dim3 grid(ceil_div(cols, kTile), ceil_div(rows, kTile)), block(kTile, kTileRows);
  cast_transpose_kernel<<<grid, block, 0, stream>>>(
      out, out_t, x, rows, cols, scale, kind == Fp8Kind::e4m3 ? __NV_E4M3 : __NV_E5M2, amax_bits);
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
  amax_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(
      reinterpret_cast<unsigned*>(amax), x, n);
  CUDA_CHECK_LAUNCH();
}

void fp8_scale_from_amax(float* scale, float* dequant, const float* amax, Fp8Kind kind,
                         cudaStream_t stream) {
  scale_from_amax_kernel<<<1, 1, 0, stream>>>(scale, dequant, amax,
                                              static_cast<float>(fp8_format(kind).max_finite));
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
