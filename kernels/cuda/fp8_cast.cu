// Invariant: outputs are written with =.
#include <cuda_fp8.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8_cast_tiles.cuh"
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

// A bf16 tensor in memory, as fp8_cast_tiles.cuh's kernels read it.
struct TensorSource {
  const bf16* x;
  int cols;
  __device__ float value(int r, int c) const { return to_float(x[std::int64_t{r} * cols + c]); }
  __device__ void values8(int r, int c, unsigned w[4]) const {
    const uint4 v = *reinterpret_cast<const uint4*>(x + std::int64_t{r} * cols + c);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
};

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
  require(ceil_div(rows, kCastTile) <= 65535, "cast_transpose_to_fp8",
          "rows " + std::to_string(rows) + " beyond the grid");
  if (rows == 0 || cols == 0 || (!out && !out_t)) return;
  launch_cast_transpose_tiles(TensorSource{x, cols}, cast_aligned(x, 16), out, out_t, rows, cols,
                              scale, kind == Fp8Kind::e4m3 ? __NV_E4M3 : __NV_E5M2, amax_bits,
                              stream);
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
  if (n % 8 == 0 && cast_aligned(x, 16))
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
