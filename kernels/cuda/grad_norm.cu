// Two-pass sum of squares; see grad_norm.hpp.
#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/grad_norm.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kBlocks = 512;  // fixed: the summation order must not depend on the GPU
constexpr int kThreads = 256;
constexpr int kMaxSegments = 65535;  // grid.y's limit

// ----------------------------------------------------------------------------
// kernels

// Pass 1: block b, thread t sums x[i]^2 for i = b * kThreads + t + k * kBlocks * kThreads.
// G: the gradient's type (float, or bf16 widened to fp32 before squaring). Segment
// blockIdx.y of a batch (grid.y 1 for one buffer): x + offsets[y], counts[y] elements,
// partials at partial + y * kBlocks. One segment's bits do not depend on the others.
template <class G>
__global__ void square_sum_partial_kernel(float* partial, const G* x, std::int64_t n,
                                          const std::int64_t* offsets, const std::int64_t* counts) {
  __shared__ float scratch[kWarpSize];
  if (offsets) {
    x += offsets[blockIdx.y];
    n = counts[blockIdx.y];
    partial += std::int64_t{blockIdx.y} * kBlocks;
  }
  float sum = 0.0f;
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n;
       i += std::int64_t{kBlocks} * kThreads) {
    const float xi = widen(x[i]);
    sum += xi * xi;
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// Pass 2: one block of kThreads per segment (blockIdx.x); thread t adds partials t,
// t + kThreads, ...; fixed tree.
__global__ void square_sum_final_kernel(float* out, const float* partial, bool accumulate) {
  __shared__ float scratch[kWarpSize];
  out += blockIdx.x;
  partial += std::int64_t{blockIdx.x} * kBlocks;
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
  square_sum_partial_kernel<G><<<kBlocks, kThreads, 0, stream>>>(partial.as<float>(), x, n,
                                                                  nullptr, nullptr);
  CUDA_CHECK_LAUNCH();
  square_sum_final_kernel<<<1, kThreads, 0, stream>>>(out, partial.as<float>(), accumulate);
  CUDA_CHECK_LAUNCH();
}

template <class G>
void square_sums(float* out, const G* base, const SquareSumSegments& segments, cudaStream_t stream) {
  require(segments.count >= 0 && segments.count <= kMaxSegments, "grad_square_sums",
          "segment count " + std::to_string(segments.count) + " outside [0, " +
              std::to_string(kMaxSegments) + "]");
  if (segments.count == 0) return;
  require(segments.offsets && segments.counts && segments.partials, "grad_square_sums",
          "segments without device arrays");
  const dim3 grid(kBlocks, static_cast<unsigned>(segments.count));
  square_sum_partial_kernel<G><<<grid, kThreads, 0, stream>>>(segments.partials, base, 0,
                                                              segments.offsets, segments.counts);
  CUDA_CHECK_LAUNCH();
  square_sum_final_kernel<<<segments.count, kThreads, 0, stream>>>(out, segments.partials, false);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t grad_square_sum_partials(int segments) {
  return static_cast<std::size_t>(segments) * kBlocks;
}

void grad_square_sums(float* out, const float* base, const SquareSumSegments& segments,
                      cudaStream_t stream) {
  square_sums(out, base, segments, stream);
}

void grad_square_sums(float* out, const bf16* base, const SquareSumSegments& segments,
                      cudaStream_t stream) {
  square_sums(out, base, segments, stream);
}

void grad_square_sum(float* out, const float* x, std::int64_t n, bool accumulate,
                     cudaStream_t stream) {
  square_sum(out, x, n, accumulate, stream);
}

void grad_square_sum(float* out, const bf16* x, std::int64_t n, bool accumulate,
                     cudaStream_t stream) {
  square_sum(out, x, n, accumulate, stream);
}

}  // namespace conveyor
