// LayerNorm (+ residual) forward, input backward and weight backward.
// One warp per row for the row-wise kernels; the statistics are warp sums (xor
// butterflies: fixed order). See layernorm.hpp for the invariants.
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

__global__ void layernorm_backward_input_kernel(bf16* dinp, const bf16* dout, const bf16* inp,
                                                const bf16* weight, const float* mean,
                                                const float* rstd, int N, int C) {
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
  for (int i = lane; i < C; i += kWarpSize) {
    const float xhat = (to_float(x[i]) - m) * s;
    const float dxhat = to_float(dy[i]) * to_float(weight[i]);
    dx[i] = to_bf16(to_float(dx[i]) + s * (dxhat - dnorm - xhat * dnorm_xhat));
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

// Pass 2: one thread per column adds the chunks in chunk order, then += once.
__global__ void layernorm_weight_final_kernel(float* dweight, float* dbias, const float* partial,
                                              int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    dw += partial[std::int64_t{k} * 2 * C + c];
    db += partial[std::int64_t{k} * 2 * C + C + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
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
  layernorm_forward_kernel<<<ceil_div(N, kRowsPerBlock), kRowsPerBlock * kWarpSize, 0, stream>>>(
      residual, out, mean, rstd, a, b, weight, bias, N, C);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward_input(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* weight,
                              const float* mean, const float* rstd, int N, int C,
                              cudaStream_t stream) {
  check_nc("layernorm_backward_input", N, C);
  layernorm_backward_input_kernel<<<ceil_div(N, kRowsPerBlock), kRowsPerBlock * kWarpSize, 0,
                                    stream>>>(dinp, dout, inp, weight, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward_weight(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                               const float* mean, const float* rstd, int N, int C,
                               cudaStream_t stream) {
  check_nc("layernorm_backward_weight", N, C);
  const int chunks = static_cast<int>(ceil_div(N, kWeightChunkRows));
  require(chunks <= 65535, "layernorm_backward_weight", "N too large: " + std::to_string(N));
  DeviceBuffer partial(sizeof(float) * 2 * std::size_t(chunks) * C, current_device(), stream,
                       "layernorm backward partial sums");
  layernorm_weight_partial_kernel<<<dim3(ceil_div(C, kColumnThreads), chunks), kColumnThreads, 0,
                                    stream>>>(partial.as<float>(), dout, inp, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
  layernorm_weight_final_kernel<<<ceil_div(C, kColumnThreads), kColumnThreads, 0, stream>>>(
      dweight, dbias, partial.as<float>(), chunks, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
