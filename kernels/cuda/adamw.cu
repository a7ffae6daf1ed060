// AdamW, one thread per element (grid-stride). The operation order follows
// kernels/optim/adamw.cpp so that fp32 results agree with the CPU to rounding
// (nvcc may contract a * b + c into an FMA: not bitwise equal to the CPU, but always the
// same on the GPU).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kThreads = 256;

// ----------------------------------------------------------------------------
// kernels

__device__ __forceinline__ float clip_factor(const AdamWHyper& hp) {
  if (!hp.grad_norm_sq || hp.max_grad_norm <= 0.0f) return 1.0f;
  const float norm = sqrtf(*hp.grad_norm_sq);
  return norm > hp.max_grad_norm ? hp.max_grad_norm / (norm + 1e-6f) : 1.0f;
}

// Weight decay of element i: binary search of the run holding i.
__device__ __forceinline__ float decay_of(std::int64_t i, const DecayRuns& runs, float wd) {
  if (runs.count == 0) return wd;
  int lo = 0, hi = runs.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (runs.ends[mid] > i) hi = mid; else lo = mid + 1;
  }
  return runs.decay[lo] ? wd : 0.0f;
}

__device__ __forceinline__ void store(float* p, std::int64_t i, float x) { p[i] = x; }
__device__ __forceinline__ void store(bf16* p, std::int64_t i, float x) { p[i] = to_bf16(x); }
__device__ __forceinline__ float read(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float read(const bf16* p, std::int64_t i) { return to_float(p[i]); }

// W: weight and moment storage type (float or bf16).
template <class W>
__global__ void adamw_kernel(W* params, bf16* compute, const float* grads, W* m, W* v,
                             std::int64_t n, AdamWHyper hp, DecayRuns runs) {
  const float scale = hp.grad_scale * clip_factor(hp);
  const float b1 = hp.beta1, b2 = hp.beta2;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float g = grads[i] * scale;
    const float mi = b1 * read(m, i) + (1.0f - b1) * g;
    const float vi = b2 * read(v, i) + (1.0f - b2) * g * g;
    const float mhat = mi / hp.bias_correction1;
    const float vhat = vi / hp.bias_correction2;
    float w = read(params, i);
    w -= hp.lr * (mhat / (sqrtf(vhat) + hp.eps) + decay_of(i, runs, hp.weight_decay) * w);
    store(m, i, mi);
    store(v, i, vi);
    store(params, i, w);
    if (compute) compute[i] = to_bf16(w);
  }
}

unsigned grid_for(std::int64_t n) {
  return static_cast<unsigned>(std::min<std::int64_t>(ceil_div(n, kThreads), 8192));
}

void check(const char* what, std::int64_t n, const AdamWHyper& hp, const DecayRuns& runs) {
  require(n >= 0, what, "negative n " + std::to_string(n));
  require(hp.bias_correction1 > 0.0f && hp.bias_correction2 > 0.0f, what,
          "bias corrections must be positive (call adamw_bias_corrections with t >= 1)");
  require(runs.count == 0 || (runs.ends && runs.decay), what, "decay runs without arrays");
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void adamw_bias_corrections(AdamWHyper& hyper, std::int64_t t) {
  require(t >= 1, "adamw_bias_corrections", "step must be >= 1, got " + std::to_string(t));
  const double td = static_cast<double>(t);
  hyper.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), td));
  hyper.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta2), td));
}

void adamw_update(float* master, bf16* compute, const float* grads, float* m, float* v,
                  std::int64_t n, const AdamWHyper& hyper, const DecayRuns& runs,
                  cudaStream_t stream) {
  check("adamw_update", n, hyper, runs);
  if (n == 0) return;
  adamw_kernel<float><<<grid_for(n), kThreads, 0, stream>>>(master, compute, grads, m, v, n,
                                                            hyper, runs);
  CUDA_CHECK_LAUNCH();
}

void adamw_update_bf16(bf16* params, const float* grads, bf16* m, bf16* v, std::int64_t n,
                       const AdamWHyper& hyper, const DecayRuns& runs, cudaStream_t stream) {
  check("adamw_update_bf16", n, hyper, runs);
  if (n == 0) return;
  adamw_kernel<bf16><<<grid_for(n), kThreads, 0, stream>>>(params, nullptr, grads, m, v, n, hyper,
                                                           runs);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
