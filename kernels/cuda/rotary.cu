// Rotary embedding, forward and backward (the inverse rotation); see rotary.hpp. One
// thread per rotated pair (b, t, h, i): two bf16 loads, two stores, fp32 math.
#include <string>

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

void launch(const char* what, bf16* x, const float* cos, const float* sin, float sign, int B,
            int T, int H, int D, std::int64_t row_stride, cudaStream_t stream) {
  require(B > 0 && T > 0 && H > 0 && D > 0, what,
          "B, T, H and D must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(H) + ", " + std::to_string(D));
  require(D % 2 == 0, what, "the head size D must be even, got " + std::to_string(D));
  require(row_stride >= std::int64_t{H} * D, what,
          "row_stride " + std::to_string(row_stride) + " is shorter than H * D = " +
              std::to_string(std::int64_t{H} * D));
  const std::int64_t pairs = std::int64_t{B} * T * H * (D / 2);
  rotary_kernel<<<grid_stride_blocks(pairs, kThreads), kThreads, 0, stream>>>(
      x, cos, sin, sign, B, T, H, D, row_stride);
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
