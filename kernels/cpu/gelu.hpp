#pragma once
// GELU, tanh approximation: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Invariant: activations and the input gradient are written with =; no parameters.
// backward_input may run in place (dinp == dout).
// The tanh of each block runs in SIMD for float (vector_math.hpp: libmvec, the CPU's widest
// vectors); libm's scalar tanhf was 39% of a tiny.yaml step, Eigen's SSE tanh 12%.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/vector_math.hpp"

namespace conveyor::cpu {
namespace gelu_detail {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
constexpr std::int64_t kBlock = 512;  // elements per step: the tanh arguments on the stack

// t[i] = tanh(k (x[i] + c x[i]^3)) for i < n <= kBlock.
template <class Real>
void tanh_of_argument(Real* t, const Real* x, std::int64_t n) {
  const Real k = static_cast<Real>(kSqrt2OverPi);
  const Real c = static_cast<Real>(kCubic);
  for (std::int64_t i = 0; i < n; ++i) t[i] = k * (x[i] + c * (x[i] * x[i] * x[i]));
  tanh_in_place(t, n);
}

}  // namespace gelu_detail

template <class Real>
void gelu_forward(Real* out,        // (N)
                  const Real* inp,  // (N)
                  std::int64_t N) {
  using namespace gelu_detail;
  alignas(64) Real t[kBlock];
  for (std::int64_t at = 0; at < N; at += kBlock) {
    const std::int64_t n = std::min(kBlock, N - at);
    const Real* x = inp + at;
    Real* y = out + at;
    tanh_of_argument(t, x, n);
    for (std::int64_t i = 0; i < n; ++i) y[i] = Real(0.5) * x[i] * (Real(1) + t[i]);
  }
}

template <class Real>
void gelu_backward_input(Real* dinp,        // (N) =
                         const Real* dout,  // (N)
                         const Real* inp,   // (N)
                         std::int64_t N) {
  using namespace gelu_detail;
  const Real k = static_cast<Real>(kSqrt2OverPi);
  const Real c3 = static_cast<Real>(3 * kCubic);
  alignas(64) Real t[kBlock];
  for (std::int64_t at = 0; at < N; at += kBlock) {
    const std::int64_t n = std::min(kBlock, N - at);
    const Real* x = inp + at;
    const Real* g = dout + at;
    Real* dx = dinp + at;  // element-wise: in place (dx == g) is safe
    tanh_of_argument(t, x, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const Real local = Real(0.5) * (Real(1) + t[i]) +
                         Real(0.5) * x[i] * (Real(1) - t[i] * t[i]) * k * (Real(1) + c3 * x[i] * x[i]);
      dx[i] = local * g[i];
    }
  }
}

}  // namespace conveyor::cpu
