// The decode attention kernel (decode_attention.hpp): one block per (query row, head).
// Each warp runs an online softmax over positions warp, warp + warps, ... of the row's
// window, each lane holding hs / 32 of the head's dimensions (lane + 32 r); the block then
// merges the warps' (max, sum, weighted values) in warp order.
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kMaxHeadSize = 256;
constexpr int kPerLane = kMaxHeadSize / kWarpSize;  // dimensions a lane may hold
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;

// grid (NH, n), block kThreads. q (n, q_stride), caches (pos + n, NKV hs), out (n, C).
__global__ void decode_attention_kernel(bf16* out, const bf16* q, std::int64_t q_stride,
                                        const bf16* k_cache, const bf16* v_cache, int pos, int C,
                                        int hs, int group, int kv_width, float scale) {
  __shared__ float warp_max_s[kWarps], warp_sum_s[kWarps];
  __shared__ float warp_acc_s[kWarps][kMaxHeadSize];
  const int h = blockIdx.x, i = blockIdx.y;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = h / group;
  const int window = pos + i + 1;  // positions [0, pos + i]

  const bf16* qh = q + std::int64_t{i} * q_stride + std::int64_t{h} * hs;  // (hs)
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    qr[r] = d < hs ? to_float(qh[d]) * scale : 0.0f;
    acc[r] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = warp; j < window; j += kWarps) {
    const bf16* kj = k_cache + std::int64_t{j} * kv_width + std::int64_t{g} * hs;  // (hs)
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int d = lane + r * kWarpSize;
      if (d < hs) s += qr[r] * to_float(kj[d]);
    }
    s = warp_sum(s);  // every lane holds the score
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first position (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
    const bf16* vj = v_cache + std::int64_t{j} * kv_width + std::int64_t{g} * hs;  // (hs)
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int d = lane + r * kWarpSize;
      if (d < hs) acc[r] = acc[r] * correction + p * to_float(vj[d]);
    }
    m = m_new;
  }
  if (lane == 0) {
    warp_max_s[warp] = m;
    warp_sum_s[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int d = lane + r * kWarpSize;
    if (d < hs) warp_acc_s[warp][d] = acc[r];
  }
  __syncthreads();
  // A warp that saw no position (window < kWarps) has max -inf and weight 0; warp 0 always
  // sees position 0, so the block's max is finite.
  float block_max = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, warp_max_s[w]);
  float weights[kWarps];
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weights[w] = expf(warp_max_s[w] - block_max);
    total += warp_sum_s[w] * weights[w];
  }
  bf16* o = out + std::int64_t{i} * C + std::int64_t{h} * hs;  // (hs)
  for (int d = threadIdx.x; d < hs; d += kThreads) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += warp_acc_s[w][d] * weights[w];
    o[d] = to_bf16(sum / total);
  }
}

}  // namespace

void decode_attention_forward(bf16* out, const bf16* q, std::int64_t q_stride, const bf16* k_cache,
                              const bf16* v_cache, int pos, int n, int C, int NH, int NKV,
                              cudaStream_t stream) {
  const char* what = "decode_attention_forward";
  require(n >= 1 && pos >= 0 && C > 0 && NH > 0 && NKV > 0, what,
          "n >= 1, pos >= 0 and C, NH, NKV positive, got n " + std::to_string(n) + ", pos " +
              std::to_string(pos) + ", C " + std::to_string(C) + ", NH " + std::to_string(NH) +
              ", NKV " + std::to_string(NKV));
  require(C % NH == 0 && C / NH <= kMaxHeadSize, what,
          "C must be NH heads of at most " + std::to_string(kMaxHeadSize) + ", got C " +
              std::to_string(C) + ", NH " + std::to_string(NH));
  require(NH % NKV == 0, what,
          "NH must be a multiple of NKV, got " + std::to_string(NH) + ", " + std::to_string(NKV));
  require(q_stride >= C, what, "q_stride must be at least C, got " + std::to_string(q_stride));
  require(n <= 65535, what, "n must be at most 65535 rows, got " + std::to_string(n));
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  decode_attention_kernel<<<dim3(NH, n), kThreads, 0, stream>>>(out, q, q_stride, k_cache, v_cache,
                                                                 pos, C, hs, NH / NKV, NKV * hs, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
