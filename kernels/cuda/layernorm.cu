// LayerNorm (+ residual) forward, input backward and weight backward.
// One warp per row for the row-wise kernels; the statistics are warp sums (xor
// butterflies: fixed order). Widths that are a multiple of 256 (up to 4096, 16-byte aligned
// rows) take register-resident kernels with 16-byte accesses; others the scalar ones. See layernorm.hpp for the invariants.
#include <cstdint>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/row_checks.cuh"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/row_vectors.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr float kEps = 1e-5f;
constexpr int kRowsPerBlock = 4;        // warps per block in the row-wise kernels
constexpr int kWeightChunkRows = 32;    // rows per partial sum in backward_weight (fixed)
constexpr int kColumnThreads = 256;     // threads per block of the scalar partial sums
constexpr int kVecColumnThreads = 128;  // of the vectorised ones (1024 columns per block)

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

// A lane's kV vectors of a row stay packed (bf16x8.cuh): every value is a bf16 anyway
// (the residual is rounded before it is normalised), and the lighter register use lets
// more rows be in flight per SM (measured on an H200 at N 4096, C 2048: forward
// 24.9 -> 22.8 us, input gradient 27.7 -> 20.8 us with every load issued up front).

template <int kV>
__global__ void layernorm_forward_vec_kernel(bf16* residual, bf16* out, float* mean, float* rstd,
                                             const bf16* a, const bf16* b, const bf16* weight,
                                             const bf16* bias, int N, int C) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const std::int64_t base = std::int64_t{row} * C;
  uint4 x[kV];  // the row being normalised, packed
  load_row_or_residual(x, residual, a, b, base, lane);
  float sum = 0.0f;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    float f[kVec];
    unpack8(f, x[v]);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum += f[k];
  }
  const float m = warp_sum(sum) / C;
  float var = 0.0f;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    float f[kVec];
    unpack8(f, x[v]);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float d = f[k] - m;
      var += d * d;
    }
  }
  const float s = 1.0f / sqrtf(warp_sum(var) / C + kEps);
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    float f[kVec], w[kVec], bb[kVec], y[kVec];
    unpack8(f, x[v]);
    load8(w, weight + o);
    load8(bb, bias + o);
#pragma unroll
    for (int k = 0; k < kVec; ++k) y[k] = (f[k] - m) * s * w[k] + bb[k];
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
  // Every load of the row is issued before the first use (acc too: it is read last, and
  // waiting for it then cost a second round trip).
  uint4 x[kV], dy[kV], ac[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    x[v] = load_raw(inp + base + o);
    dy[v] = load_raw(dout + base + o);
    ac[v] = load_raw(acc + base + o);
  }
  // xhat and dxhat are formed twice from the packed values, the same operations each time.
  float dnorm = 0.0f, dnorm_xhat = 0.0f;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    float xhat[kVec], dxhat[kVec], w[kVec];
    unpack8(xhat, x[v]);
    unpack8(dxhat, dy[v]);
    load8(w, weight + vec_offset(v, lane));
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      xhat[k] = (xhat[k] - m) * s;
      dxhat[k] *= w[k];
      dnorm += dxhat[k];
      dnorm_xhat += dxhat[k] * xhat[k];
    }
  }
  dnorm = warp_sum(dnorm) / C;
  dnorm_xhat = warp_sum(dnorm_xhat) / C;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int o = vec_offset(v, lane);
    float xhat[kVec], dxhat[kVec], w[kVec], dx[kVec];
    unpack8(xhat, x[v]);
    unpack8(dxhat, dy[v]);
    unpack8(dx, ac[v]);
    load8(w, weight + o);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      xhat[k] = (xhat[k] - m) * s;
      dxhat[k] *= w[k];
      dx[k] += s * (dxhat[k] - dnorm - xhat[k] * dnorm_xhat);
    }
    store8(dinp + base + o, dx);
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

// Pass 1 for C a multiple of 8 (16-byte aligned rows): the same sums, eight columns per
// thread with 16-byte loads; each column's partial gets the same bits as above.
__global__ void layernorm_weight_partial_vec_kernel(float* partial, const bf16* dout,
                                                    const bf16* inp, const float* mean,
                                                    const float* rstd, int N, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kVec;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int begin = chunk * kWeightChunkRows;
  const int end = min(N, begin + kWeightChunkRows);
  float dw[kVec] = {}, db[kVec] = {};
#pragma unroll 4
  for (int n = begin; n < end; ++n) {
    const std::int64_t i = std::int64_t{n} * C + c;
    float dy[kVec], x[kVec];
    load8(dy, dout + i);
    load8(x, inp + i);
    const float m = mean[n], s = rstd[n];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      dw[k] += dy[k] * ((x[k] - m) * s);
      db[k] += dy[k];
    }
  }
  float* p = partial + std::int64_t{chunk} * 2 * C + c;
#pragma unroll
  for (int k = 0; k < kVec; k += 4) {
    *reinterpret_cast<float4*>(p + k) = make_float4(dw[k], dw[k + 1], dw[k + 2], dw[k + 3]);
    *reinterpret_cast<float4*>(p + C + k) = make_float4(db[k], db[k + 1], db[k + 2], db[k + 3]);
  }
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
  if (C % kVec == 0 && aligned16(dout) && aligned16(inp))
    layernorm_weight_partial_vec_kernel<<<dim3(ceil_div(C, kVec * kVecColumnThreads), chunks),
                                          kVecColumnThreads, 0, stream>>>(
        partial.as<float>(), dout, inp, mean, rstd, N, C);
  else
    layernorm_weight_partial_kernel<<<dim3(ceil_div(C, kColumnThreads), chunks), kColumnThreads,
                                      0, stream>>>(partial.as<float>(), dout, inp, mean, rstd, N,
                                                   C);
  CUDA_CHECK_LAUNCH();
  // partial is (chunks, 2C): each chunk's dweight sums, then its dbias sums.
  add_column_partials(dweight, dbias, C, partial.as<float>(), chunks, 2 * C, stream);
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
