#pragma once
// GELU, tanh approximation: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Invariant: activations and the input gradient are written with =; no parameters.
// backward_input may run in place (dinp == dout).
#include <cmath>
#include <cstdint>

namespace conveyor::cpu {

template <class Real>
void gelu_forward(Real* out,        // (N)
                  const Real* inp,  // (N)
                  std::int64_t N) {
  const Real k = static_cast<Real>(0.7978845608028654);  // sqrt(2 / pi)
  const Real c = static_cast<Real>(0.044715);
  for (std::int64_t i = 0; i < N; ++i) {
    Real x = inp[i];
    out[i] = Real(0.5) * x * (Real(1) + std::tanh(k * (x + c * x * x * x)));
  }
}

template <class Real>
void gelu_backward_input(Real* dinp,        // (N) =
                         const Real* dout,  // (N)
                         const Real* inp,   // (N)
                         std::int64_t N) {
  const Real k = static_cast<Real>(0.7978845608028654);
  const Real c = static_cast<Real>(0.044715);
  for (std::int64_t i = 0; i < N; ++i) {
    Real x = inp[i];
    Real th = std::tanh(k * (x + c * x * x * x));
    Real sech2 = Real(1) - th * th;
    Real local =
        Real(0.5) * (Real(1) + th) + Real(0.5) * x * sech2 * k * (Real(1) + Real(3) * c * x * x);
    dinp[i] = local * dout[i];
  }
}

}  // namespace conveyor::cpu
