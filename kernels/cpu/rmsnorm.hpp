#pragma once
// RMSNorm over the last dimension (Llama's norm): out = x * rstd * weight,
// rstd = 1 / sqrt(mean(x^2) + eps); no mean subtraction, no bias. eps is the model's
// norm_eps (Llama 2: 1e-5 or 1e-6, Llama 3: 1e-5), so it is an argument, not a constant.
// Invariant: parameter gradients are accumulated with +=; activations are written with =;
// the input gradient is accumulated with += (the caller seeds it with the residual
// gradient, as for layernorm_backward_input).
// Backward is split like layernorm.hpp: backward_input needs (x, rstd, weight);
// backward_weight needs (x, rstd) and the same dout, and recomputes xhat = x * rstd. Rows are
// visited in order, so the accumulation order of dweight is fixed.
#include <cmath>
#include <cstdint>
#include <vector>

namespace conveyor::cpu {

template <class Real>
void rmsnorm_forward(Real* out,           // (N, C)
                     Real* rstd,          // (N)
                     const Real* inp,     // (N, C)
                     const Real* weight,  // (C)
                     double eps, std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;  // (C)
    Real ms = 0;
    for (std::int64_t i = 0; i < C; ++i) ms += x[i] * x[i];
    ms /= static_cast<Real>(C);
    const Real s = Real(1) / std::sqrt(ms + static_cast<Real>(eps));
    Real* o = out + n * C;  // (C)
    for (std::int64_t i = 0; i < C; ++i) o[i] = (x[i] * s) * weight[i];
    rstd[n] = s;
  }
}

template <class Real>
void rmsnorm_backward_input(Real* dinp,          // (N, C) +=
                            const Real* dout,    // (N, C)
                            const Real* inp,     // (N, C)
                            const Real* weight,  // (C)
                            const Real* rstd,    // (N)
                            std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;    // (C)
    const Real* dy = dout + n * C;  // (C)
    Real* dx = dinp + n * C;        // (C)
    const Real s = rstd[n];
    // d rstd / d x_j = -rstd^3 x_j / C, so with xhat = x * rstd and dxhat = dy * weight:
    // dx = rstd * (dxhat - xhat * mean(dxhat * xhat))
    Real dnorm_xhat_mean = 0;
    for (std::int64_t i = 0; i < C; ++i) dnorm_xhat_mean += (dy[i] * weight[i]) * (x[i] * s);
    dnorm_xhat_mean /= static_cast<Real>(C);
    for (std::int64_t i = 0; i < C; ++i) {
      const Real xhat = x[i] * s;
      const Real dxhat = dy[i] * weight[i];
      dx[i] += s * (dxhat - xhat * dnorm_xhat_mean);
    }
  }
}

template <class Real>
void rmsnorm_backward_weight(Real* dweight,     // (C) +=
                             const Real* dout,  // (N, C)
                             const Real* inp,   // (N, C)
                             const Real* rstd,  // (N)
                             std::int64_t N, std::int64_t C) {
  // This call's sums first, then one += (as for layernorm_backward_weight).
  std::vector<Real> dw(static_cast<std::size_t>(C), Real(0));
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;    // (C)
    const Real* dy = dout + n * C;  // (C)
    const Real s = rstd[n];
    for (std::int64_t i = 0; i < C; ++i) dw[i] += dy[i] * (x[i] * s);
  }
  for (std::int64_t i = 0; i < C; ++i) dweight[i] += dw[i];
}

}  // namespace conveyor::cpu
