// Fused softmax cross-entropy. Each thread keeps an online (max, sum) over its strided
// elements; the block combines the pairs in a fixed tree (xor butterflies, then warps in
// order), so the result does not depend on timing.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cross_entropy.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kThreads = 512;

// ----------------------------------------------------------------------------
// kernels

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;  // both empty
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

// grid N, block kThreads.
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(float* losses, bf16* dlogits, const bf16* logits,
                         const std::int32_t* targets, float dloss, int V) {
  __shared__ float m_s[kWarpSize], s_s[kWarpSize];
  const int row = blockIdx.x;
  const bf16* l = logits + std::int64_t{row} * V;
  const int target = targets[row];
  // Read before any write: dlogits may alias logits.
  const float target_logit = to_float(l[target]);

  float m = -INFINITY, s = 0.0f;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const float x = to_float(l[i]);
    if (x > m) {
      s = s * expf(m - x) + 1.0f;
      m = x;
    } else {
      s += expf(x - m);
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    combine(m, s, m2, s2);
  }
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    m_s[warp] = m;
    s_s[warp] = s;
  }
  __syncthreads();  // also: every read of the row in the loop above is done
  m = lane < kThreads / kWarpSize ? m_s[lane] : -INFINITY;
  s = lane < kThreads / kWarpSize ? s_s[lane] : 0.0f;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    combine(m, s, m2, s2);
  }
  if (threadIdx.x == 0) losses[row] = logf(s) + m - target_logit;
  if (!dlogits) return;
  const float inv_sum = 1.0f / s;
  bf16* d = dlogits + std::int64_t{row} * V;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const float p = expf(to_float(l[i]) - m) * inv_sum;
    d[i] = to_bf16((p - (i == target ? 1.0f : 0.0f)) * dloss);
  }
}

// One block: thread t sums elements t, t + blockDim, ... in order; then a fixed tree.
__global__ void mean_loss_kernel(float* mean, const float* losses, int N) {
  __shared__ float scratch[kWarpSize];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) sum += losses[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *mean = sum / N;
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void cross_entropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits,
                                    const std::int32_t* targets, float dloss, int N, int V,
                                    cudaStream_t stream) {
  require(N > 0 && V > 0, "cross_entropy_forward_backward",
          "N and V must be positive, got " + std::to_string(N) + ", " + std::to_string(V));
  cross_entropy_kernel<<<N, kThreads, 0, stream>>>(losses, dlogits, logits, targets, dloss, V);
  CUDA_CHECK_LAUNCH();
}

void mean_loss(float* mean, const float* losses, int N, cudaStream_t stream) {
  require(N > 0, "mean_loss", "N must be positive, got " + std::to_string(N));
  mean_loss_kernel<<<1, 1024, 0, stream>>>(mean, losses, N);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
