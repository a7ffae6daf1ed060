// Two-pass sum of squares; see grad_norm.hpp.
#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/grad_norm.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kBlocks = 512;  // fixed: the summation order must not depend on the GPU
constexpr int kThreads = 256;

// ----------------------------------------------------------------------------
// kernels

// Pass 1: block b, thread t sums x[i]^2 for i = b * kThreads + t + k * kBlocks * kThreads.
// G: the gradient's type (float, or bf16 widened to fp32 before squaring).
template <class G>
__global__ void square_sum_partial_kernel(float* partial, const G* x, std::int64_t n) {
  __shared__ float scratch[kWarpSize];
  float sum = 0.0f;
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n;
       i += std::int64_t{kBlocks} * kThreads) {
    const float xi = widen(x[i]);
    sum += xi * xi;
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// Pass 2: one block of kThreads; thread t adds partials t, t + kThreads, ...; fixed tree.
__global__ void square_sum_final_kernel(float* out, const float* partial, bool accumulate) {
  __shared__ float scratch[kWarpSize];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < kBlocks; i += kThreads) sum += partial[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *out = accumulate ? *out + sum : sum;
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

namespace {

template <class G>
void square_sum(float* out, const G* x, std::int64_t n, bool accumulate, cudaStream_t stream) {
  require(n >= 0, "grad_square_sum", "negative n " + std::to_string(n));
  DeviceBuffer partial(sizeof(float) * kBlocks, current_device(), stream,
                       "grad_square_sum partials");
  square_sum_partial_kernel<G><<<kBlocks, kThreads, 0, stream>>>(partial.as<float>(), x, n);
  CUDA_CHECK_LAUNCH();
  square_sum_final_kernel<<<1, kThreads, 0, stream>>>(out, partial.as<float>(), accumulate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void grad_square_sum(float* out, const float* x, std::int64_t n, bool accumulate,
                     cudaStream_t stream) {
  square_sum(out, x, n, accumulate, stream);
}

void grad_square_sum(float* out, const bf16* x, std::int64_t n, bool accumulate,
                     cudaStream_t stream) {
  square_sum(out, x, n, accumulate, stream);
}

}  // namespace conveyor
