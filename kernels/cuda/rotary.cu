// Rotary embedding, forward and backward (the inverse rotation); see rotary.hpp. Head sizes
// that are a multiple of 16 on 16-byte aligned rows: a block per row (b, t), each thread
// 8 rotated pairs of one head with 16-byte accesses (rotary_vec_kernel); others one thread
// per rotated pair. The same fp32 arithmetic per pair either way, so the same bits.
#include <algorithm>
#include <string>

#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rotary.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kThreads = 256;

// sign = 1: rotate by +t w_i (forward); -1: by -t w_i (backward).
__global__ void rotary_kernel(bf16* x, const float* cos, const float* sin, float sign, int B,
                              int T, int H, int D, std::int64_t row_stride) {
  const int half = D / 2;
  const std::int64_t pairs = std::int64_t{B} * T * H * half;
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < pairs;
       p += std::int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(p % half);
    const int h = static_cast<int>((p / half) % H);
    const std::int64_t bt = p / (std::int64_t{half} * H);  // b * T + t
    const int t = static_cast<int>(bt % T);
    bf16* x1 = x + bt * row_stride + std::int64_t{h} * D + i;
    bf16* x2 = x1 + half;
    const float c = cos[std::int64_t{t} * half + i];
    const float s = sign * sin[std::int64_t{t} * half + i];
    const float a = to_float(*x1), d = to_float(*x2);
    *x1 = to_bf16(a * c - d * s);
    *x2 = to_bf16(d * c + a * s);
  }
}

// grid: rows b * T + t (grid-stride), block: threads over the row's H * D / 16 vectors of
// 8 pairs: vector j is head j / (D / 16), pairs i = 8 (j % (D / 16)) ... + 7, whose halves
// x1 (i) and x2 (i + D / 2) are one 16-byte vector each. Measured on an H100 (bench
// kernels, Llama-3.2-1B's 4 x 1024 tokens, 40 rotated heads of 64): the per-pair kernel
// ran at 1.05 TB/s, its 64-bit index arithmetic per pair the bound.
__global__ void rotary_vec_kernel(bf16* x, const float* cos, const float* sin, float sign,
                                  std::int64_t rows, int T, int H, int D,
                                  std::int64_t row_stride) {
  const int half = D / 2, per_head = half / kVec, per_row = H * per_head;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int t = static_cast<int>(row % T);
    for (int j = threadIdx.x; j < per_row; j += blockDim.x) {
      const int h = j / per_head, i = (j % per_head) * kVec;
      bf16* x1 = x + row * row_stride + std::int64_t{h} * D + i;
      bf16* x2 = x1 + half;
      const float4* c4 = reinterpret_cast<const float4*>(cos + std::int64_t{t} * half + i);
      const float4* s4 = reinterpret_cast<const float4*>(sin + std::int64_t{t} * half + i);
      const float4 c_lo = c4[0], c_hi = c4[1], s_lo = s4[0], s_hi = s4[1];
      const float c[kVec] = {c_lo.x, c_lo.y, c_lo.z, c_lo.w, c_hi.x, c_hi.y, c_hi.z, c_hi.w};
      const float sn[kVec] = {s_lo.x, s_lo.y, s_lo.z, s_lo.w, s_hi.x, s_hi.y, s_hi.z, s_hi.w};
      float a[kVec], d[kVec], y1[kVec], y2[kVec];
      load8(a, x1);
      load8(d, x2);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float s = sign * sn[k];
        y1[k] = a[k] * c[k] - d[k] * s;
        y2[k] = d[k] * c[k] + a[k] * s;
      }
      store8(x1, y1);
      store8(x2, y2);
    }
  }
}

bool launch_vec(bf16* x, const float* cos, const float* sin, float sign, int B, int T, int H,
                int D, std::int64_t row_stride, cudaStream_t stream) {
  if (D % (2 * kVec) != 0 || row_stride % kVec != 0 || !aligned16(x) || !aligned16(cos) ||
      !aligned16(sin))
    return false;
  const int per_row = H * (D / 2 / kVec);
  const int threads = std::min(kThreads, (per_row + kWarpSize - 1) / kWarpSize * kWarpSize);
  const std::int64_t rows = std::int64_t{B} * T;
  rotary_vec_kernel<<<grid_stride_blocks(rows, 1, 1 << 20), threads, 0, stream>>>(
      x, cos, sin, sign, rows, T, H, D, row_stride);
  return true;
}

void launch(const char* what, bf16* x, const float* cos, const float* sin, float sign, int B,
            int T, int H, int D, std::int64_t row_stride, cudaStream_t stream) {
  require(B > 0 && T > 0 && H > 0 && D > 0, what,
          "B, T, H and D must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(H) + ", " + std::to_string(D));
  require(D % 2 == 0, what, "the head size D must be even, got " + std::to_string(D));
  require(row_stride >= std::int64_t{H} * D, what,
          "row_stride " + std::to_string(row_stride) + " is shorter than H * D = " +
              std::to_string(std::int64_t{H} * D));
  if (!launch_vec(x, cos, sin, sign, B, T, H, D, row_stride, stream)) {
    const std::int64_t pairs = std::int64_t{B} * T * H * (D / 2);
    rotary_kernel<<<grid_stride_blocks(pairs, kThreads), kThreads, 0, stream>>>(
        x, cos, sin, sign, B, T, H, D, row_stride);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void rotary_forward(bf16* x, const float* cos, const float* sin, int B, int T, int H, int D,
                    std::int64_t row_stride, cudaStream_t stream) {
  launch("rotary_forward", x, cos, sin, 1.0f, B, T, H, D, row_stride, stream);
}

void rotary_backward(bf16* dx, const float* cos, const float* sin, int B, int T, int H, int D,
                     std::int64_t row_stride, cudaStream_t stream) {
  launch("rotary_backward", dx, cos, sin, -1.0f, B, T, H, D, row_stride, stream);
}

}  // namespace conveyor
