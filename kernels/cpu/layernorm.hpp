#pragma once
// LayerNorm over the last dimension: out = (x - mean) * rstd * weight + bias,
// rstd = 1 / sqrt(var + 1e-5) with the biased variance.
// Invariant: parameter gradients are accumulated with +=; activations are written with =;
// the input gradient is accumulated with += (the caller seeds it with the residual
// gradient, so the skip connection costs no extra pass).
// Backward is split: backward_input needs (x, mean, rstd, weight); backward_weight needs
// (x, mean, rstd) and the same dout, and recomputes xhat. Rows are visited in order, so
// the accumulation order of dweight and dbias is fixed.
#include <cmath>
#include <cstdint>
#include <vector>

namespace conveyor::cpu {

inline constexpr double kLayerNormEps = 1e-5;

template <class Real>
void layernorm_forward(Real* out,           // (N, C)
                       Real* mean,          // (N)
                       Real* rstd,          // (N)
                       const Real* inp,     // (N, C)
                       const Real* weight,  // (C)
                       const Real* bias,    // (C)
                       std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;  // (C)
    Real m = 0;
    for (std::int64_t i = 0; i < C; ++i) m += x[i];
    m /= static_cast<Real>(C);
    Real v = 0;
    for (std::int64_t i = 0; i < C; ++i) {
      Real d = x[i] - m;
      v += d * d;
    }
    v /= static_cast<Real>(C);
    Real s = Real(1) / std::sqrt(v + static_cast<Real>(kLayerNormEps));
    Real* o = out + n * C;  // (C)
    for (std::int64_t i = 0; i < C; ++i) o[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class Real>
void layernorm_backward_input(Real* dinp,          // (N, C) +=
                              const Real* dout,    // (N, C)
                              const Real* inp,     // (N, C)
                              const Real* weight,  // (C)
                              const Real* mean,    // (N)
                              const Real* rstd,    // (N)
                              std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;    // (C)
    const Real* dy = dout + n * C;  // (C)
    Real* dx = dinp + n * C;        // (C)
    const Real m = mean[n], s = rstd[n];
    // dxhat = dy * weight; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    Real dnorm_mean = 0, dnorm_xhat_mean = 0;
    for (std::int64_t i = 0; i < C; ++i) {
      Real xhat = (x[i] - m) * s;
      Real dxhat = dy[i] * weight[i];
      dnorm_mean += dxhat;
      dnorm_xhat_mean += dxhat * xhat;
    }
    dnorm_mean /= static_cast<Real>(C);
    dnorm_xhat_mean /= static_cast<Real>(C);
    for (std::int64_t i = 0; i < C; ++i) {
      Real xhat = (x[i] - m) * s;
      Real dxhat = dy[i] * weight[i];
      dx[i] += s * (dxhat - dnorm_mean - xhat * dnorm_xhat_mean);
    }
  }
}

template <class Real>
void layernorm_backward_weight(Real* dweight,     // (C) +=
                               Real* dbias,       // (C) +=
                               const Real* dout,  // (N, C)
                               const Real* inp,   // (N, C)
                               const Real* mean,  // (N)
                               const Real* rstd,  // (N)
                               std::int64_t N, std::int64_t C) {
  // This call's sums first, then one += (as for the linear bias).
  std::vector<Real> dw(static_cast<std::size_t>(C), Real(0)),
      db(static_cast<std::size_t>(C), Real(0));
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* x = inp + n * C;    // (C)
    const Real* dy = dout + n * C;  // (C)
    const Real m = mean[n], s = rstd[n];
    for (std::int64_t i = 0; i < C; ++i) {
      dw[i] += dy[i] * ((x[i] - m) * s);
      db[i] += dy[i];
    }
  }
  for (std::int64_t i = 0; i < C; ++i) {
    dweight[i] += dw[i];
    dbias[i] += db[i];
  }
}

}  // namespace conveyor::cpu
