// Fused softmax cross-entropy, one block per row. Rows of 8k bf16 (V a multiple of 8, up to
// 65536, 16-byte aligned) take the vectorised kernel: the row is read once with 16-byte
// loads and held packed in registers, the block forms its max, then the sum of
// exp(x - max), then writes the gradient from the registers. Longer such rows stream
// twice with 16-byte loads (cross_entropy_stream_kernel). Other rows take the scalar
// kernel: an online (max, sum) per thread over its strided elements, the row read twice.
// Either way the block combines per-thread values in a fixed tree (xor butterflies, then
// warps in order), so the result does not depend on timing.
#include <cmath>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cross_entropy.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kScalarThreads = 512;

// ----------------------------------------------------------------------------
// kernels

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;  // both empty
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

// grid N, block kScalarThreads.
__global__ void __launch_bounds__(kScalarThreads)
    cross_entropy_kernel(float* losses, bf16* dlogits, const bf16* logits,
                         const std::int32_t* targets, float dloss, int V) {
  __shared__ float m_s[kWarpSize], s_s[kWarpSize];
  const int row = blockIdx.x;
  const bf16* l = logits + std::int64_t{row} * V;
  const int target = targets[row];
  // Read before any write: dlogits may alias logits.
  const float target_logit = to_float(l[target]);

  float m = -INFINITY, s = 0.0f;
  for (int i = threadIdx.x; i < V; i += kScalarThreads) {
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
  m = lane < kScalarThreads / kWarpSize ? m_s[lane] : -INFINITY;
  s = lane < kScalarThreads / kWarpSize ? s_s[lane] : 0.0f;
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
  for (int i = threadIdx.x; i < V; i += kScalarThreads) {
    const float p = expf(to_float(l[i]) - m) * inv_sum;
    d[i] = to_bf16((p - (i == target ? 1.0f : 0.0f)) * dloss);
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// Calls f(i, values) for each vector i this thread holds inside the row (vector v of the
// thread is i = v * kThreads + threadIdx.x), its values unpacked.
template <int kThreads, int kNV, class F>
__device__ __forceinline__ void for_each_held(const uint4 (&x)[kNV], int vectors, F&& f) {
#pragma unroll
  for (int v = 0; v < kNV; ++v) {
    const int i = v * kThreads + threadIdx.x;
    if (i >= vectors) break;
    float values[kVec];
    unpack8(values, x[v]);
    f(i, values);
  }
}

// grid N, block kThreads; thread t holds vectors t, t + kThreads, ... (kNV of them, the
// last ones past the row left empty). Measured on an H200 at N 4096, V 32768 (bench
// kernels): 0.198 ms for loss and gradient in place against 0.291 for the scalar kernel.
// Instances (launch_vec): 1024 threads with up to 4 vectors each (V <= 32768), 512 with up
// to 16 (V <= 65536; 64 registers of packed row, which 1024 threads cannot hold; ptxas
// still spills 64 bytes of that instance).
template <int kThreads, int kNV>
__global__ void __launch_bounds__(kThreads, 1)
    cross_entropy_vec_kernel(float* losses, bf16* dlogits, const bf16* logits,
                             const std::int32_t* targets, float dloss, int V) {
  __shared__ float scratch[kWarpSize];
  const int row = blockIdx.x;
  const bf16* l = logits + std::int64_t{row} * V;
  const int target = targets[row];
  const float target_logit = to_float(l[target]);  // every read precedes every write
  const int vectors = V / kVec;
  uint4 x[kNV];
  float m = -INFINITY;
#pragma unroll
  for (int v = 0; v < kNV; ++v) {
    const int i = v * kThreads + threadIdx.x;
    if (i < vectors) x[v] = load_raw(l + std::int64_t{i} * kVec);
  }
  for_each_held<kThreads>(x, vectors, [&](int, float(&f)[kVec]) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = fmaxf(m, f[k]);
  });
  m = block_max(m, scratch);
  const float m_log2e = m * kLog2e;  // exp(x - m) = 2^(x log2e - m log2e)
  float s = 0.0f;
  for_each_held<kThreads>(x, vectors, [&](int, float(&f)[kVec]) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) s += exp2f(fmaf(f[k], kLog2e, -m_log2e));
  });
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) losses[row] = logf(s) + m - target_logit;
  if (!dlogits) return;
  const float inv_sum = 1.0f / s;
  bf16* d = dlogits + std::int64_t{row} * V;
  for_each_held<kThreads>(x, vectors, [&](int i, float(&f)[kVec]) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float p = exp2f(fmaf(f[k], kLog2e, -m_log2e)) * inv_sum;
      f[k] = (p - (i * kVec + k == target ? 1.0f : 0.0f)) * dloss;
    }
    store_raw(d + std::int64_t{i} * kVec, pack8(f));
  });
}

// block kThreads, grid at most one block per multiprocessor (stream_grid), each block
// taking rows blockIdx.x, blockIdx.x + gridDim.x, ...: rows too long for
// cross_entropy_vec_kernel's registers (Llama 3's V 128256). Each thread streams its
// vectors (t, t + kThreads, ...) twice with 16-byte loads: an online (max, sum) of its own
// in the first pass, combined over the block in a fixed tree (the max, then each thread's
// sum rescaled to it, then the sum); the gradient in the second pass, the row read again.
// Why the grid is small: a row is 256 KB at V 128256, so one row per multiprocessor in
// flight (33 MB on an H100) stays in L2 for the second read, where a row per block over
// N blocks (two resident per multiprocessor) overflowed it and read every row from memory
// twice. A row's arithmetic does not depend on the grid: the bits are the same. Each thread
// reads a vector before it writes it, and target_logit is read before the first barrier,
// so dlogits may alias logits.
template <int kThreads>
__device__ __forceinline__ void cross_entropy_stream_row(
    float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets, float dloss, int V,
    int row, float* scratch) {
  const bf16* l = logits + std::int64_t{row} * V;
  const int target = targets[row];
  const float target_logit = to_float(l[target]);
  const int vectors = V / kVec;
  float m = -INFINITY, s = 0.0f;  // s: the sum of exp(x - m) over this thread's elements
  // Unrolled so that several 16-byte loads are in flight per thread (one block per
  // multiprocessor must keep the memory busy); the sums' order is unchanged.
#pragma unroll 4
  for (int i = threadIdx.x; i < vectors; i += kThreads) {
    float f[kVec];
    unpack8(f, load_raw(l + std::int64_t{i} * kVec));
    float vm = f[0];
#pragma unroll
    for (int k = 1; k < kVec; ++k) vm = fmaxf(vm, f[k]);
    if (vm > m) {
      s *= exp2f((m - vm) * kLog2e);  // m = -inf: s is 0 and stays 0
      m = vm;
    }
    const float m_log2e = m * kLog2e;
#pragma unroll
    for (int k = 0; k < kVec; ++k) s += exp2f(fmaf(f[k], kLog2e, -m_log2e));
  }
  const float mx = block_max(m, scratch);
  s = m == -INFINITY ? 0.0f : s * exp2f((m - mx) * kLog2e);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) losses[row] = logf(s) + mx - target_logit;
  if (!dlogits) return;  // (block_reduce waits before it reuses scratch for the next row)
  const float inv_sum = 1.0f / s, mx_log2e = mx * kLog2e;
  bf16* d = dlogits + std::int64_t{row} * V;
#pragma unroll 4
  for (int i = threadIdx.x; i < vectors; i += kThreads) {
    float f[kVec];
    unpack8(f, load_raw(l + std::int64_t{i} * kVec));
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float p = exp2f(fmaf(f[k], kLog2e, -mx_log2e)) * inv_sum;
      f[k] = (p - (i * kVec + k == target ? 1.0f : 0.0f)) * dloss;
    }
    store_raw(d + std::int64_t{i} * kVec, pack8(f));
  }
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_stream_kernel(float* losses, bf16* dlogits, const bf16* logits,
                                const std::int32_t* targets, float dloss, int N, int V) {
  __shared__ float scratch[kWarpSize];
  for (int row = blockIdx.x; row < N; row += gridDim.x)
    cross_entropy_stream_row<kThreads>(losses, dlogits, logits, targets, dloss, V, row, scratch);
}

// cross_entropy_stream_kernel's grid: one block per multiprocessor of the current device
// (at most N).
int stream_grid(int N) {
  int multiprocessors = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, current_device()));
  return std::max(1, std::min(N, multiprocessors));
}

// Launches a vectorised kernel when the row's width and alignment allow one; false (the caller uses the scalar
// kernel) otherwise.
bool launch_vec(float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets,
                float dloss, int N, int V, cudaStream_t stream) {
  if (V % kVec != 0 || !aligned16(logits) || !aligned16(dlogits)) return false;
  const int vectors = V / kVec;
  auto launch = [&](auto kernel, int threads) {
    kernel<<<N, threads, 0, stream>>>(losses, dlogits, logits, targets, dloss, V);
    return true;
  };
  if (vectors <= 1024) return launch(cross_entropy_vec_kernel<1024, 1>, 1024);
  if (vectors <= 2 * 1024) return launch(cross_entropy_vec_kernel<1024, 2>, 1024);
  if (vectors <= 4 * 1024) return launch(cross_entropy_vec_kernel<1024, 4>, 1024);
  if (vectors <= 16 * 512) return launch(cross_entropy_vec_kernel<512, 16>, 512);
  cross_entropy_stream_kernel<1024><<<stream_grid(N), 1024, 0, stream>>>(losses, dlogits, logits, targets,
                                                                         dloss, N, V);
  return true;
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
  if (!launch_vec(losses, dlogits, logits, targets, dloss, N, V, stream))
    cross_entropy_kernel<<<N, kScalarThreads, 0, stream>>>(losses, dlogits, logits, targets,
                                                           dloss, V);
  CUDA_CHECK_LAUNCH();
}

void mean_loss(float* mean, const float* losses, int N, cudaStream_t stream) {
  require(N > 0, "mean_loss", "N must be positive, got " + std::to_string(N));
  mean_loss_kernel<<<1, 1024, 0, stream>>>(mean, losses, N);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
