// LayerNorm (+ residual) forward, input backward and weight backward.
// One warp per row for the row-wise kernels; the statistics are warp sums (xor
// butterflies: fixed order). Widths that are a multiple of 256 (up to 4096, 16-byte aligned
// rows) take register-resident kernels with 16-byte accesses; others the scalar ones. See layernorm.hpp for the invariants.
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/layernorm.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr float kEps = 1e-5f;
constexpr int kRowsPerBlock = 4;        // warps per block in the row-wise kernels
constexpr int kWeightChunkRows = 32;    // rows per partial sum in backward_weight (fixed)
constexpr int kColumnThreads = 256;

// ----------------------------------------------------------------------------
// kernels

// residual == nullptr: x = a (b is ignored). Otherwise x = bf16(a + b), stored in residual.
__global__ void layernorm_forward_kernel(bf16* residual, bf16* out, float* mean, float* rstd,
                                         const bf16* a, const bf16* b, const bf16* weight,
                                         const bf16* bias, int N, int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const std::int64_t base = std::int64_t{row} * C;
  const bf16* x = residual ? residual + base : a + base;  // (C) what gets normalised
  float sum = 0.0f;
  if (residual) {
    for (int i = lane; i < C; i += kWarpSize) {
      const bf16 r = to_bf16(to_float(a[base + i]) + to_float(b[base + i]));
      residual[base + i] = r;
      sum += to_float(r);
    }
  } else {
    for (int i = lane; i < C; i += kWarpSize) sum += to_float(x[i]);
  }
  // Each lane re-reads only the elements it wrote itself, so no barrier is needed.
  const float m = warp_sum(sum) / C;
  float var = 0.0f;
  for (int i = lane; i < C; i += kWarpSize) {
    const float d = to_float(x[i]) - m;
    var += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(var) / C + kEps);
  bf16* o = out + base;
  for (int i = lane; i < C; i += kWarpSize)
    o[i] = to_bf16((to_float(x[i]) - m) * s * to_float(weight[i]) + to_float(bias[i]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dinp = acc + the LayerNorm input gradient (acc == dinp: +=).
__global__ void layernorm_backward_input_kernel(bf16* dinp, const bf16* acc, const bf16* dout,
                                                const bf16* inp, const bf16* weight,
                                                const float* mean, const float* rstd, int N,
                                                int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const std::int64_t base = std::int64_t{row} * C;
  const bf16* x = inp + base;
  const bf16* dy = dout + base;
  const float m = mean[row], s = rstd[row];
  float dnorm = 0.0f, dnorm_xhat = 0.0f;
  for (int i = lane; i < C; i += kWarpSize) {
    const float xhat = (to_float(x[i]) - m) * s;
    const float dxhat = to_float(dy[i]) * to_float(weight[i]);
    dnorm += dxhat;
    dnorm_xhat += dxhat * xhat;
  }
  dnorm = warp_sum(dnorm) / C;
  dnorm_xhat = warp_sum(dnorm_xhat) / C;
  bf16* dx = dinp + base;
  const bf16* a = acc + base;
  for (int i = lane; i < C; i += kWarpSize) {
    const float xhat = (to_float(x[i]) - m) * s;
    const float dxhat = to_float(dy[i]) * to_float(weight[i]);
    dx[i] = to_bf16(to_float(a[i]) + s * (dxhat - dnorm - xhat * dnorm_xhat));
  }
}

// ---- register-resident variants for C = kV * 256 (every GPT width that is a multiple of
// 256 up to 4096): each lane holds kV 16-byte vectors of its row in registers, so a row is
// read from global memory once and written once, with 16-byte accesses. Same arithmetic as
// the scalar kernels above per element; the sums run in a different (still fixed) order.

constexpr int kVec = 8;  // bf16 per 16-byte vector

__device__ __forceinline__ void load8(float (&f)[kVec], const bf16* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < kVec / 2; ++k) {
    const float2 v = __bfloat1622float2(h[k]);
    f[2 * k] = v.x;
    f[2 * k + 1] = v.y;
  }
}

__device__ __forceinline__ void store8(bf16* p, const float (&f)[kVec]) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < kVec / 2; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// Element offset of lane `lane`'s vector v within a row: consecutive lanes read consecutive
// 16-byte vectors (a warp reads 512 contiguous bytes per step).
__device__ __forceinline__ int vec_offset(int v, int lane) { return (v * kWarpSize + lane) * kVec; }

template <int kV>
__global__ void layernorm_forward_vec_kernel(bf16* residual, bf16* out, float* mean, float* rstd,
                                             const bf16* a, const bf16* b, const bf16* weight,
                                             const bf16* bias, int N, int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const std::int64_t base = std::int64_t{row} * C;
  float x[kV][kVec];
  float sum = 0.0f;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    load8(x[v], a + base + o);
    if (residual) {
      float y[kVec];
      load8(y, b + base + o);
#pragma unroll
      for (int k = 0; k < kVec; ++k) x[v][k] = to_float(to_bf16(x[v][k] + y[k]));
      store8(residual + base + o, x[v]);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum += x[v][k];
  }
  const float m = warp_sum(sum) / C;
  float var = 0.0f;
#pragma unroll
  for (int v = 0; v < kV; ++v)
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float d = x[v][k] - m;
      var += d * d;
    }
  const float s = 1.0f / sqrtf(warp_sum(var) / C + kEps);
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    float w[kVec], bb[kVec], y[kVec];
    load8(w, weight + o);
    load8(bb, bias + o);
#pragma unroll
    for (int k = 0; k < kVec; ++k) y[k] = (x[v][k] - m) * s * w[k] + bb[k];
    store8(out + base + o, y);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

template <int kV>
__global__ void layernorm_backward_input_vec_kernel(bf16* dinp, const bf16* acc,
                                                    const bf16* dout, const bf16* inp,
                                                    const bf16* weight, const float* mean,
                                                    const float* rstd, int N, int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const std::int64_t base = std::int64_t{row} * C;
  const float m = mean[row], s = rstd[row];
  float xhat[kV][kVec], dxhat[kV][kVec];
  float dnorm = 0.0f, dnorm_xhat = 0.0f;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    float w[kVec];
    load8(xhat[v], inp + base + o);
    load8(dxhat[v], dout + base + o);
    load8(w, weight + o);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      xhat[v][k] = (xhat[v][k] - m) * s;
      dxhat[v][k] *= w[k];
      dnorm += dxhat[v][k];
      dnorm_xhat += dxhat[v][k] * xhat[v][k];
    }
  }
  dnorm = warp_sum(dnorm) / C;
  dnorm_xhat = warp_sum(dnorm_xhat) / C;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    float dx[kVec];
    load8(dx, acc + base + o);
#pragma unroll
    for (int k = 0; k < kVec; ++k) dx[k] += s * (dxhat[v][k] - dnorm - xhat[v][k] * dnorm_xhat);
    store8(dinp + base + o, dx);
  }
}

// Calls f(std::integral_constant<int, kV>) when C = kV * 256 for a supported kV and every
// pointer is 16-byte aligned; returns false (the caller uses the scalar kernel) otherwise.
template <class F>
bool with_vec_width(int C, std::initializer_list<const void*> ptrs, F&& f) {
  if (C % (kVec * kWarpSize) != 0) return false;
  for (const void* p : ptrs)
    if (p && reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  switch (C / (kVec * kWarpSize)) {
    case 1: f(std::integral_constant<int, 1>{}); return true;
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 3: f(std::integral_constant<int, 3>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 6: f(std::integral_constant<int, 6>{}); return true;
    case 8: f(std::integral_constant<int, 8>{}); return true;
    case 12: f(std::integral_constant<int, 12>{}); return true;
    case 16: f(std::integral_constant<int, 16>{}); return true;
    default: return false;
  }
}

// Pass 1: grid (ceil(C / threads), chunks). partial (chunks, 2, C): this chunk's sums of
// dout * xhat and of dout for each column, rows in order.
__global__ void layernorm_weight_partial_kernel(float* partial, const bf16* dout, const bf16* inp,
                                                const float* mean, const float* rstd, int N,
                                                int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int begin = chunk * kWeightChunkRows;
  const int end = min(N, begin + kWeightChunkRows);
  float dw = 0.0f, db = 0.0f;
  for (int n = begin; n < end; ++n) {
    const std::int64_t i = std::int64_t{n} * C + c;
    const float dy = to_float(dout[i]);
    dw += dy * ((to_float(inp[i]) - mean[n]) * rstd[n]);
    db += dy;
  }
  float* p = partial + std::int64_t{chunk} * 2 * C;
  p[c] = dw;
  p[C + c] = db;
}

// Pass 2: one thread per column adds the chunks in chunk order, then += once. G: the
// gradients' type (float or bf16).
template <class G>
__global__ void layernorm_weight_final_kernel(G* dweight, G* dbias, const float* partial,
                                              int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    dw += partial[std::int64_t{k} * 2 * C + c];
    db += partial[std::int64_t{k} * 2 * C + C + c];
  }
  add_to_grad(dweight + c, dw);
  add_to_grad(dbias + c, db);
}

void check_nc(const char* what, int N, int C) {
  require(N > 0 && C > 0, what,
          "N and C must be positive, got " + std::to_string(N) + ", " + std::to_string(C));
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int N, int C, cudaStream_t stream) {
  check_nc("layernorm_forward", N, C);
  const unsigned blocks = ceil_div(N, kRowsPerBlock);
  if (with_vec_width(C, {out, inp, weight, bias}, [&](auto kv) {
        layernorm_forward_vec_kernel<decltype(kv)::value>
            <<<blocks, kRowsPerBlock * kWarpSize, 0, stream>>>(nullptr, out, mean, rstd, inp,
                                                               nullptr, weight, bias, N, C);
      })) {
    CUDA_CHECK_LAUNCH();
    return;
  }
  layernorm_forward_kernel<<<ceil_div(N, kRowsPerBlock), kRowsPerBlock * kWarpSize, 0, stream>>>(
      nullptr, out, mean, rstd, inp, nullptr, weight, bias, N, C);
  CUDA_CHECK_LAUNCH();
}

void residual_layernorm_forward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* a,
                                const bf16* b, const bf16* weight, const bf16* bias, int N, int C,
                                cudaStream_t stream) {
  check_nc("residual_layernorm_forward", N, C);
  require(residual != nullptr && b != nullptr, "residual_layernorm_forward",
          "residual and b must not be null");
  const unsigned blocks = ceil_div(N, kRowsPerBlock);
  if (with_vec_width(C, {residual, out, a, b, weight, bias}, [&](auto kv) {
        layernorm_forward_vec_kernel<decltype(kv)::value>
            <<<blocks, kRowsPerBlock * kWarpSize, 0, stream>>>(residual, out, mean, rstd, a, b,
                                                               weight, bias, N, C);
      })) {
    CUDA_CHECK_LAUNCH();
    return;
  }
  layernorm_forward_kernel<<<ceil_div(N, kRowsPerBlock), kRowsPerBlock * kWarpSize, 0, stream>>>(
      residual, out, mean, rstd, a, b, weight, bias, N, C);
  CUDA_CHECK_LAUNCH();
}

namespace {

void launch_backward_input(const char* what, bf16* dinp, const bf16* acc, const bf16* dout,
                           const bf16* inp, const bf16* weight, const float* mean,
                           const float* rstd, int N, int C, cudaStream_t stream) {
  check_nc(what, N, C);
  const unsigned blocks = ceil_div(N, kRowsPerBlock);
  if (with_vec_width(C, {dinp, acc, dout, inp, weight}, [&](auto kv) {
        layernorm_backward_input_vec_kernel<decltype(kv)::value>
            <<<blocks, kRowsPerBlock * kWarpSize, 0, stream>>>(dinp, acc, dout, inp, weight, mean,
                                                               rstd, N, C);
      })) {
    CUDA_CHECK_LAUNCH();
    return;
  }
  layernorm_backward_input_kernel<<<blocks, kRowsPerBlock * kWarpSize, 0, stream>>>(
      dinp, acc, dout, inp, weight, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void layernorm_backward_input(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* weight,
                              const float* mean, const float* rstd, int N, int C,
                              cudaStream_t stream) {
  launch_backward_input("layernorm_backward_input", dinp, dinp, dout, inp, weight, mean, rstd, N,
                        C, stream);
}

void layernorm_backward_input_residual(bf16* dinp, const bf16* dresidual, const bf16* dout,
                                       const bf16* inp, const bf16* weight, const float* mean,
                                       const float* rstd, int N, int C, cudaStream_t stream) {
  require(dresidual != nullptr, "layernorm_backward_input_residual", "dresidual must not be null");
  launch_backward_input("layernorm_backward_input_residual", dinp, dresidual, dout, inp, weight,
                        mean, rstd, N, C, stream);
}

namespace {

template <class G>
void backward_weight(G* dweight, G* dbias, const bf16* dout, const bf16* inp, const float* mean,
                     const float* rstd, int N, int C, cudaStream_t stream) {
  check_nc("layernorm_backward_weight", N, C);
  const int chunks = static_cast<int>(ceil_div(N, kWeightChunkRows));
  require(chunks <= 65535, "layernorm_backward_weight", "N too large: " + std::to_string(N));
  DeviceBuffer partial(sizeof(float) * 2 * std::size_t(chunks) * C, current_device(), stream,
                       "layernorm backward partial sums");
  layernorm_weight_partial_kernel<<<dim3(ceil_div(C, kColumnThreads), chunks), kColumnThreads, 0,
                                    stream>>>(partial.as<float>(), dout, inp, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
  layernorm_weight_final_kernel<G><<<ceil_div(C, kColumnThreads), kColumnThreads, 0, stream>>>(
      dweight, dbias, partial.as<float>(), chunks, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void layernorm_backward_weight(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                               const float* mean, const float* rstd, int N, int C,
                               cudaStream_t stream) {
  backward_weight(dweight, dbias, dout, inp, mean, rstd, N, C, stream);
}

void layernorm_backward_weight(bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                               const float* mean, const float* rstd, int N, int C,
                               cudaStream_t stream) {
  backward_weight(dweight, dbias, dout, inp, mean, rstd, N, C, stream);
}

}  // namespace conveyor
