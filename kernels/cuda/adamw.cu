// AdamW, eight (or four) elements per thread with vector loads (grid-stride; one per thread
// for unaligned buffers). Every operation is an explicitly rounded intrinsic in the order of
// kernels/optim/adamw.cpp: nvcc may not contract a * b + c into an FMA (which it did in
// some kernels and not others once inlined: the 8-wide and scalar kernels differed in the
// last bit), so each kernel gives the same bits, and the fp32 update is bit for bit the
// CPU reference's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/bf16x8.cuh"
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

// Index of the run holding element i (binary search). REQUIRES: runs.count > 0.
__device__ __forceinline__ int run_of(std::int64_t i, const DecayRuns& runs) {
  int lo = 0, hi = runs.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (runs.ends[mid] > i) hi = mid; else lo = mid + 1;
  }
  return lo;
}

__device__ __forceinline__ float decay_of(std::int64_t i, const DecayRuns& runs, float wd) {
  if (runs.count == 0) return wd;
  return runs.decay[run_of(i, runs)] ? wd : 0.0f;
}

// One element's update from its raw gradient, in the CPU reference's operation order
// (adamw_step: gk = g * scale; m = b1 m + (1 - b1) gk; v = b2 v + ((1 - b2) gk) gk;
// w -= lr (m / bc1 / (sqrt(v / bc2) + eps) + decay w)), each step rounded on its own.
__device__ __forceinline__ void adamw_element(float g_raw, float scale, float& m, float& v,
                                              float& w, float decay, const AdamWHyper& hp) {
  const float g = __fmul_rn(g_raw, scale);
  m = __fadd_rn(__fmul_rn(hp.beta1, m), __fmul_rn(1.0f - hp.beta1, g));
  v = __fadd_rn(__fmul_rn(hp.beta2, v), __fmul_rn(__fmul_rn(1.0f - hp.beta2, g), g));
  const float mhat = __fdiv_rn(m, hp.bias_correction1);
  const float vhat = __fdiv_rn(v, hp.bias_correction2);
  const float step = __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), hp.eps)),
                               __fmul_rn(decay, w));
  w = __fsub_rn(w, __fmul_rn(hp.lr, step));
}

// kPer consecutive elements (4 or 8) in one or two 16-byte accesses, or one 8-byte access
// for 4 bf16.
template <int kPer>
__device__ __forceinline__ void load_n(float (&f)[kPer], const float* p) {
#pragma unroll
  for (int j = 0; j < kPer; j += 4) {
    const float4 x = *reinterpret_cast<const float4*>(p + j);
    f[j] = x.x; f[j + 1] = x.y; f[j + 2] = x.z; f[j + 3] = x.w;
  }
}
template <int kPer>
__device__ __forceinline__ void load_n(float (&f)[kPer], const bf16* p) {
  if constexpr (kPer == 8) {
    load8(f, p);
  } else {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y;
  }
}
template <int kPer>
__device__ __forceinline__ void store_n(float* p, const float (&f)[kPer]) {
#pragma unroll
  for (int j = 0; j < kPer; j += 4)
    *reinterpret_cast<float4*>(p + j) = make_float4(f[j], f[j + 1], f[j + 2], f[j + 3]);
}
template <int kPer>
__device__ __forceinline__ void store_n(bf16* p, const float (&f)[kPer]) {
  if constexpr (kPer == 8) {
    store8(p, f);
  } else {
    const __nv_bfloat162 a = __floats2bfloat162_rn(f[0], f[1]);
    const __nv_bfloat162 b = __floats2bfloat162_rn(f[2], f[3]);
    uint2 raw;
    raw.x = *reinterpret_cast<const unsigned*>(&a);
    raw.y = *reinterpret_cast<const unsigned*>(&b);
    *reinterpret_cast<uint2*>(p) = raw;
  }
}

// Element i's update, read and written one element at a time.
template <class W, class G>
__device__ __forceinline__ void adamw_at(std::int64_t i, W* params, bf16* compute,
                                         const G* grads, W* m, W* v, float scale,
                                         const AdamWHyper& hp, const DecayRuns& runs) {
  float mi = widen(m[i]), vi = widen(v[i]), w = widen(params[i]);
  adamw_element(widen(grads[i]), scale, mi, vi, w, decay_of(i, runs, hp.weight_decay), hp);
  store_narrowed(m + i, mi);
  store_narrowed(v + i, vi);
  store_narrowed(params + i, w);
  if (compute) compute[i] = to_bf16(w);
}

// W: weight and moment storage type (float or bf16); G: gradient type (float or bf16,
// widened to fp32 as it is read). Each thread updates kPer (4 or 8) consecutive elements
// per iteration with vector loads and one run search for them (the common case: they share
// a run); the last n % kPer elements one by one. REQUIRES: every pointer aligned to kPer
// elements or 16 bytes, whichever is less (the launchers check it and use a narrower
// kernel otherwise). 8 per thread gives bf16 buffers 16-byte accesses (4 per thread: 8-byte
// ones); the all-bf16 update took 6.7 ms per step of the 1B model with 4 per thread.
template <class W, class G, int kPer>
__global__ void adamw_kernel(W* params, bf16* compute, const G* grads, W* m, W* v,
                             std::int64_t n, AdamWHyper hp, DecayRuns runs) {
  const float scale = hp.grad_scale * clip_factor(hp);
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t first = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  for (std::int64_t q = first; q < n / kPer; q += stride) {
    const std::int64_t i = q * kPer;
    float decay[kPer];
    if (runs.count == 0) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) decay[k] = hp.weight_decay;
    } else {
      const int r = run_of(i, runs);
      if (runs.ends[r] >= i + kPer) {
#pragma unroll
        for (int k = 0; k < kPer; ++k) decay[k] = runs.decay[r] ? hp.weight_decay : 0.0f;
      } else {
#pragma unroll
        for (int k = 0; k < kPer; ++k) decay[k] = decay_of(i + k, runs, hp.weight_decay);
      }
    }
    float g[kPer], mm[kPer], vv[kPer], w[kPer];
    load_n(g, grads + i);
    load_n(mm, m + i);
    load_n(vv, v + i);
    load_n(w, params + i);
#pragma unroll
    for (int k = 0; k < kPer; ++k) adamw_element(g[k], scale, mm[k], vv[k], w[k], decay[k], hp);
    store_n(m + i, mm);
    store_n(v + i, vv);
    store_n(params + i, w);
    if (compute) store_n(compute + i, w);
  }
  for (std::int64_t i = n / kPer * kPer + first; i < n; i += stride) {
    adamw_at(i, params, compute, grads, m, v, scale, hp, runs);
  }
}

// The same update one element per thread, for buffers not aligned to 4 elements.
template <class W, class G>
__global__ void adamw_scalar_kernel(W* params, bf16* compute, const G* grads, W* m, W* v,
                                    std::int64_t n, AdamWHyper hp, DecayRuns runs) {
  const float scale = hp.grad_scale * clip_factor(hp);
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    adamw_at(i, params, compute, grads, m, v, scale, hp, runs);
  }
}

// True when every pointer is aligned to kPer of its elements or to 16 bytes, whichever is
// less (what adamw_kernel<..., kPer>'s accesses need).
template <int kPer>
bool aligned_for(std::initializer_list<std::pair<const void*, std::size_t>> ptrs) {
  for (const auto& [p, element_bytes] : ptrs) {
    const std::size_t need = std::min<std::size_t>(kPer * element_bytes, 16);
    if (p && reinterpret_cast<std::uintptr_t>(p) % need != 0) return false;
  }
  return true;
}

unsigned grid_for(std::int64_t n) { return grid_stride_blocks(n, kThreads, 8192); }

void check(const char* what, std::int64_t n, const AdamWHyper& hp, const DecayRuns& runs) {
  require(n >= 0, what, "negative n " + std::to_string(n));
  require(hp.bias_correction1 > 0.0f && hp.bias_correction2 > 0.0f, what,
          "bias corrections must be positive (call adamw_bias_corrections with t >= 1)");
  require(runs.count == 0 || (runs.ends && runs.decay), what, "decay runs without arrays");
}

// Every launcher: 8 elements per thread when every buffer allows it, else 4, else the
// scalar kernel. `compute` is null in the all-bf16 recipe.
template <class W, class G>
void launch(const char* what, W* params, bf16* compute, const G* grads, W* m, W* v,
            std::int64_t n, const AdamWHyper& hyper, const DecayRuns& runs, cudaStream_t stream) {
  check(what, n, hyper, runs);
  if (n == 0) return;
  const std::initializer_list<std::pair<const void*, std::size_t>> buffers = {
      {params, sizeof(W)}, {compute, sizeof(bf16)}, {grads, sizeof(G)}, {m, sizeof(W)},
      {v, sizeof(W)}};
  if (aligned_for<8>(buffers))
    adamw_kernel<W, G, 8><<<grid_for(ceil_div(n, 8)), kThreads, 0, stream>>>(
        params, compute, grads, m, v, n, hyper, runs);
  else if (aligned_for<4>(buffers))
    adamw_kernel<W, G, 4><<<grid_for(ceil_div(n, 4)), kThreads, 0, stream>>>(
        params, compute, grads, m, v, n, hyper, runs);
  else
    adamw_scalar_kernel<W, G><<<grid_for(n), kThreads, 0, stream>>>(params, compute, grads, m, v,
                                                                     n, hyper, runs);
  CUDA_CHECK_LAUNCH();
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
  launch("adamw_update", master, compute, grads, m, v, n, hyper, runs, stream);
}

void adamw_update(float* master, bf16* compute, const bf16* grads, float* m, float* v,
                  std::int64_t n, const AdamWHyper& hyper, const DecayRuns& runs,
                  cudaStream_t stream) {
  launch("adamw_update", master, compute, grads, m, v, n, hyper, runs, stream);
}

void adamw_update_bf16(bf16* params, const float* grads, bf16* m, bf16* v, std::int64_t n,
                       const AdamWHyper& hyper, const DecayRuns& runs, cudaStream_t stream) {
  launch("adamw_update_bf16", params, static_cast<bf16*>(nullptr), grads, m, v, n, hyper, runs,
         stream);
}

void adamw_update_bf16(bf16* params, const bf16* grads, bf16* m, bf16* v, std::int64_t n,
                       const AdamWHyper& hyper, const DecayRuns& runs, cudaStream_t stream) {
  launch("adamw_update_bf16", params, static_cast<bf16*>(nullptr), grads, m, v, n, hyper, runs,
         stream);
}

}  // namespace conveyor
