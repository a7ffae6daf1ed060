// Flash-style causal attention: forward with online softmax, backward as dK/dV and dQ
// kernels. Correctness first: CUDA-core FMAs, fp32 accumulation, no tensor cores yet.
//
// Work decomposition (forward and dQ): a block of 4 warps owns 16 consecutive query rows of
// one (batch, head), 4 rows per warp; it walks key tiles of 32 keys staged in shared
// memory, lane j of a warp owning key j of the tile for the scores and output dimensions
// d = lane + 32 i for the accumulators. dK/dV is the mirror image: a block owns 16 keys and
// walks query tiles. Shared rows are padded so that lane j reading row j hits bank j.
#include <cmath>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kBlockRows = kWarps * kRowsPerWarp;  // 16 rows (queries or keys) per block
constexpr int kTile = 32;                          // keys (or queries) per shared tile
constexpr int kThreads = kWarps * kWarpSize;

struct HeadView {  // pointers of one (batch, head) inside the fused layouts
  const bf16* q;   // (T, hs), row stride 3C
  const bf16* k;
  const bf16* v;
  std::int64_t stride;  // 3C
};

__device__ __forceinline__ HeadView head_view(const bf16* qkv, int b, int h, int T, int C, int hs) {
  const bf16* q = qkv + std::int64_t{b} * T * 3 * C + std::int64_t{h} * hs;
  return {q, q + C, q + 2 * C, 3 * std::int64_t{C}};
}

// ----------------------------------------------------------------------------
// kernels

// grid (ceil(T / 16), B * NH), block 128.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int C, int NH,
                             float scale) {
  constexpr int kPer = D / kWarpSize;  // output dims per lane
  __shared__ float q_s[kBlockRows][D];
  __shared__ float k_s[kTile][D + 1];
  __shared__ float v_s[kTile][D + 1];

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int q0 = blockIdx.x * kBlockRows;
  const HeadView hv = head_view(qkv, b, h, T, C, D);

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, qi = q0 + r;
    q_s[r][d] = qi < T ? to_float(hv.q[qi * hv.stride + d]) : 0.0f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) o[r][i] = 0.0f;
  }

  const int kv_end = min(T, q0 + kBlockRows);  // keys past the block's last query are masked
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // the previous tile is no longer read (and q_s is written, first time)
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int j = idx / D, d = idx % D, kj = k0 + j;
      k_s[j][d] = kj < T ? to_float(hv.k[kj * hv.stride + d]) : 0.0f;
      v_s[j][d] = kj < T ? to_float(hv.v[kj * hv.stride + d]) : 0.0f;
    }
    __syncthreads();

    float s[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float kd = k_s[lane][d];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += q_s[warp * kRowsPerWarp + r][d] * kd;
    }
    const int kj = k0 + lane;
    float p[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qi = q0 + warp * kRowsPerWarp + r;
      const bool valid = qi < T && kj <= qi;
      const float sr = valid ? s[r] * scale : -INFINITY;
      const float tile_max = warp_max(sr);
      p[r] = 0.0f;
      if (tile_max == -INFINITY) continue;  // whole tile masked for this row (warp-uniform)
      const float m_new = fmaxf(m[r], tile_max);
      p[r] = valid ? expf(sr - m_new) : 0.0f;
      const float alpha = expf(m[r] - m_new);  // 0 on the first tile (m = -inf)
      l[r] = l[r] * alpha + warp_sum(p[r]);
#pragma unroll
      for (int i = 0; i < kPer; ++i) o[r][i] *= alpha;
      m[r] = m_new;
    }
    for (int j = 0; j < kTile; ++j) {
      float vj[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) vj[i] = v_s[j][lane + kWarpSize * i];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pj = __shfl_sync(0xffffffffu, p[r], j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) o[r][i] += pj * vj[i];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= T) continue;
    const float inv = 1.0f / l[r];  // l >= 1: the row's maximum contributes exp(0)
    bf16* o_row = out + (std::int64_t{b} * T + qi) * C + std::int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) o_row[lane + kWarpSize * i] = to_bf16(o[r][i] * inv);
    if (lane == 0) lse[std::int64_t{bh} * T + qi] = m[r] + logf(l[r]);
  }
}

// delta[b, h, t] = sum_d dout[b, t, h, d] * out[b, t, h, d]. One warp per (b, h, t).
__global__ void attention_delta_kernel(float* delta, const bf16* dout, const bf16* out, int B,
                                       int T, int C, int NH) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kWarps} + threadIdx.x / kWarpSize;
  if (row >= std::int64_t{B} * NH * T) return;
  const int t = static_cast<int>(row % T);
  const int bh = static_cast<int>(row / T), b = bh / NH, h = bh % NH;
  const int hs = C / NH;
  const std::int64_t base = (std::int64_t{b} * T + t) * C + std::int64_t{h} * hs;
  float sum = 0.0f;
  for (int d = lane; d < hs; d += kWarpSize) sum += to_float(dout[base + d]) * to_float(out[base + d]);
  sum = warp_sum(sum);
  if (lane == 0) delta[row] = sum;
}

// dK, dV. grid (ceil(T / 16), B * NH), block 128. The block owns keys [k0, k0 + 16) and
// walks query tiles from the one holding k0 to the end (earlier queries cannot see them).
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                 const float* delta, int T, int C, int NH, float scale) {
  constexpr int kPer = D / kWarpSize;
  constexpr int kPad = D + 2;  // bf16 rows padded by one 4-byte word
  __shared__ float k_s[kBlockRows][D];
  __shared__ float v_s[kBlockRows][D];
  __shared__ bf16 q_s[kTile][kPad];
  __shared__ bf16 do_s[kTile][kPad];
  __shared__ float lse_s[kTile];
  __shared__ float delta_s[kTile];

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int k0 = blockIdx.x * kBlockRows;
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;  // row stride C

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, kj = k0 + r;
    k_s[r][d] = kj < T ? to_float(hv.k[kj * hv.stride + d]) : 0.0f;
    v_s[r][d] = kj < T ? to_float(hv.v[kj * hv.stride + d]) : 0.0f;
  }

  float dk[kRowsPerWarp][kPer], dv[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kPer; ++i) dk[r][i] = dv[r][i] = 0.0f;

  for (int qt = k0 / kTile * kTile; qt < T; qt += kTile) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int j = idx / D, d = idx % D, qi = qt + j;
      q_s[j][d] = qi < T ? hv.q[qi * hv.stride + d] : to_bf16(0.0f);
      do_s[j][d] = qi < T ? dout_h[std::int64_t{qi} * C + d] : to_bf16(0.0f);
    }
    if (threadIdx.x < kTile) {
      const int qi = qt + threadIdx.x;
      lse_s[threadIdx.x] = qi < T ? lse[std::int64_t{bh} * T + qi] : 0.0f;
      delta_s[threadIdx.x] = qi < T ? delta[std::int64_t{bh} * T + qi] : 0.0f;
    }
    __syncthreads();

    // lane = query qt + lane; rows r = this warp's keys.
    float s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float qd = to_float(q_s[lane][d]);
      const float dod = to_float(do_s[lane][d]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        s[r] += qd * k_s[warp * kRowsPerWarp + r][d];
        dp[r] += dod * v_s[warp * kRowsPerWarp + r][d];
      }
    }
    const int qi = qt + lane;
    float p[kRowsPerWarp], ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int kj = k0 + warp * kRowsPerWarp + r;
      const bool valid = qi < T && kj < T && kj <= qi;
      p[r] = valid ? expf(s[r] * scale - lse_s[lane]) : 0.0f;
      ds[r] = p[r] * (dp[r] - delta_s[lane]);
    }
    for (int j = 0; j < kTile; ++j) {
      float qj[kPer], doj[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        qj[i] = to_float(q_s[j][lane + kWarpSize * i]);
        doj[i] = to_float(do_s[j][lane + kWarpSize * i]);
      }
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pj = __shfl_sync(0xffffffffu, p[r], j);
        const float dsj = __shfl_sync(0xffffffffu, ds[r], j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          dv[r][i] += pj * doj[i];
          dk[r][i] += dsj * qj[i];
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int kj = k0 + warp * kRowsPerWarp + r;
    if (kj >= T) continue;
    bf16* row = dqkv + (std::int64_t{b} * T + kj) * 3 * C + std::int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      row[C + lane + kWarpSize * i] = to_bf16(dk[r][i] * scale);
      row[2 * C + lane + kWarpSize * i] = to_bf16(dv[r][i]);
    }
  }
}

// dQ. grid (ceil(T / 16), B * NH), block 128. The block owns queries [q0, q0 + 16) and walks
// key tiles up to its last query.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                const float* delta, int T, int C, int NH, float scale) {
  constexpr int kPer = D / kWarpSize;
  constexpr int kPad = D + 2;
  __shared__ float q_s[kBlockRows][D];
  __shared__ float do_s[kBlockRows][D];
  __shared__ bf16 k_s[kTile][kPad];
  __shared__ bf16 v_s[kTile][kPad];

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int q0 = blockIdx.x * kBlockRows;
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, qi = q0 + r;
    q_s[r][d] = qi < T ? to_float(hv.q[qi * hv.stride + d]) : 0.0f;
    do_s[r][d] = qi < T ? to_float(dout_h[std::int64_t{qi} * C + d]) : 0.0f;
  }
  float row_lse[kRowsPerWarp], row_delta[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    row_lse[r] = qi < T ? lse[std::int64_t{bh} * T + qi] : 0.0f;
    row_delta[r] = qi < T ? delta[std::int64_t{bh} * T + qi] : 0.0f;
  }

  float dq[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kPer; ++i) dq[r][i] = 0.0f;

  const int kv_end = min(T, q0 + kBlockRows);
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int j = idx / D, d = idx % D, kj = k0 + j;
      k_s[j][d] = kj < T ? hv.k[kj * hv.stride + d] : to_bf16(0.0f);
      v_s[j][d] = kj < T ? hv.v[kj * hv.stride + d] : to_bf16(0.0f);
    }
    __syncthreads();

    // lane = key k0 + lane; rows r = this warp's queries.
    float s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float kd = to_float(k_s[lane][d]);
      const float vd = to_float(v_s[lane][d]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        s[r] += q_s[warp * kRowsPerWarp + r][d] * kd;
        dp[r] += do_s[warp * kRowsPerWarp + r][d] * vd;
      }
    }
    const int kj = k0 + lane;
    float ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qi = q0 + warp * kRowsPerWarp + r;
      const bool valid = qi < T && kj <= qi;
      const float p = valid ? expf(s[r] * scale - row_lse[r]) : 0.0f;
      ds[r] = p * (dp[r] - row_delta[r]);
    }
    for (int j = 0; j < kTile; ++j) {
      float kj_[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) kj_[i] = to_float(k_s[j][lane + kWarpSize * i]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float dsj = __shfl_sync(0xffffffffu, ds[r], j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) dq[r][i] += dsj * kj_[i];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= T) continue;
    bf16* row = dqkv + (std::int64_t{b} * T + qi) * 3 * C + std::int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) row[lane + kWarpSize * i] = to_bf16(dq[r][i] * scale);
  }
}

void check_dims(const char* what, int B, int T, int C, int NH) {
  require(B > 0 && T > 0 && C > 0 && NH > 0, what,
          "B, T, C, NH must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(C) + ", " + std::to_string(NH));
  require(C % NH == 0 && (C / NH == 64 || C / NH == 128), what,
          "head size C / NH must be 64 or 128, got C=" + std::to_string(C) +
              " NH=" + std::to_string(NH));
  require(std::int64_t{B} * NH <= 65535, what, "B * NH must be <= 65535");
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  check_dims("attention_forward", B, T, C, NH);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const dim3 grid(ceil_div(T, kBlockRows), B * NH);
  if (hs == 64)
    attention_forward_kernel<64><<<grid, kThreads, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
  else
    attention_forward_kernel<128><<<grid, kThreads, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
  CUDA_CHECK_LAUNCH();
}

void attention_backward_input(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                              const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
  check_dims("attention_backward_input", B, T, C, NH);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const std::int64_t rows = std::int64_t{B} * NH * T;
  DeviceBuffer delta(sizeof(float) * rows, current_device(), stream, "attention backward delta");
  attention_delta_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(delta.as<float>(), dout,
                                                                         out, B, T, C, NH);
  CUDA_CHECK_LAUNCH();
  const dim3 grid(ceil_div(T, kBlockRows), B * NH);
  if (hs == 64) {
    attention_backward_kv_kernel<64><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                    delta.as<float>(), T, C, NH,
                                                                    scale);
    CUDA_CHECK_LAUNCH();
    attention_backward_q_kernel<64><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                   delta.as<float>(), T, C, NH,
                                                                   scale);
  } else {
    attention_backward_kv_kernel<128><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                     delta.as<float>(), T, C, NH,
                                                                     scale);
    CUDA_CHECK_LAUNCH();
    attention_backward_q_kernel<128><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                    delta.as<float>(), T, C, NH,
                                                                    scale);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
