#pragma once
// GELU, tanh approximation: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Invariant: activations and the input gradient are written with =; no parameters.
// backward_input may run in place (dinp == dout).
// Eigen evaluates the expressions in SIMD registers, with its polynomial tanh for float
// (libm's scalar tanhf was 39% of a tiny.yaml step on the CPU); double keeps std::tanh.
#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

namespace conveyor::cpu {
namespace gelu_detail {

template <class Real>
using Column = Eigen::Array<Real, Eigen::Dynamic, 1>;

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
constexpr std::int64_t kBlock = 512;  // elements per step of the backward: its tanh on the stack

}  // namespace gelu_detail

template <class Real>
void gelu_forward(Real* out,        // (N)
                  const Real* inp,  // (N)
                  std::int64_t N) {
  using namespace gelu_detail;
  const Real k = static_cast<Real>(kSqrt2OverPi);
  const Real c = static_cast<Real>(kCubic);
  const Eigen::Map<const Column<Real>> x(inp, N);
  Eigen::Map<Column<Real>> y(out, N);
  y = Real(0.5) * x * (Real(1) + (k * (x + c * x.cube())).tanh());
}

template <class Real>
void gelu_backward_input(Real* dinp,        // (N) =
                         const Real* dout,  // (N)
                         const Real* inp,   // (N)
                         std::int64_t N) {
  using namespace gelu_detail;
  const Real k = static_cast<Real>(kSqrt2OverPi);
  const Real c = static_cast<Real>(kCubic);
  Eigen::Array<Real, kBlock, 1> th;
  for (std::int64_t at = 0; at < N; at += kBlock) {
    const std::int64_t n = std::min(kBlock, N - at);
    const Eigen::Map<const Column<Real>> x(inp + at, n), g(dout + at, n);
    Eigen::Map<Column<Real>> dx(dinp + at, n);  // coefficient-wise: in place is safe
    auto t = th.head(n);
    t = (k * (x + c * x.cube())).tanh();
    dx = (Real(0.5) * (Real(1) + t) +
          Real(0.5) * x * (Real(1) - t.square()) * k * (Real(1) + Real(3) * c * x.square())) *
         g;
  }
}

}  // namespace conveyor::cpu
