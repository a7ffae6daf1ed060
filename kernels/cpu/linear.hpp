#pragma once
// Linear layer, weights stored (out, in) like PyTorch: out = inp W^T + b.
// Invariant: parameter gradients are accumulated with += (GEMM beta = 1); activations and
// the input gradient are written with =.
// Backward is split for zero-bubble schedules: backward_input needs only (dout, W);
// backward_weight needs (dout, inp). Bias sums visit rows in order, so the accumulation
// order is fixed and does not depend on where the layer runs. The bias sum of one call is
// formed first and then added to the gradient once.
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm.hpp"

namespace conveyor::cpu {

template <class Real>
void linear_forward(Real* out,           // (N, OC)
                    const Real* inp,     // (N, IC)
                    const Real* weight,  // (OC, IC)
                    const Real* bias,    // (OC), or null for no bias
                    std::int64_t N, std::int64_t IC, std::int64_t OC) {
  if (bias) {
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < OC; ++o) out[n * OC + o] = bias[o];
  }
  gemm(false, true, N, OC, IC, Real(1), inp, IC, weight, IC, bias ? Real(1) : Real(0), out, OC);
}

template <class Real>
void linear_backward_input(Real* dinp,          // (N, IC) =
                           const Real* dout,    // (N, OC)
                           const Real* weight,  // (OC, IC)
                           std::int64_t N, std::int64_t IC, std::int64_t OC) {
  gemm(false, false, N, IC, OC, Real(1), dout, OC, weight, IC, Real(0), dinp, IC);
}

template <class Real>
void linear_backward_weight(Real* dweight,     // (OC, IC) +=
                            Real* dbias,       // (OC) +=, or null for no bias
                            const Real* dout,  // (N, OC)
                            const Real* inp,   // (N, IC)
                            std::int64_t N, std::int64_t IC, std::int64_t OC) {
  gemm(true, false, OC, IC, N, Real(1), dout, OC, inp, IC, Real(1), dweight, IC);
  if (dbias) {
    // Sum this call's rows first, then add once, like the GEMM: the gradient of two equal
    // micro-batches is then exactly twice the gradient of one.
    std::vector<Real> sum(static_cast<std::size_t>(OC), Real(0));
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < OC; ++o) sum[o] += dout[n * OC + o];
    for (std::int64_t o = 0; o < OC; ++o) dbias[o] += sum[o];
  }
}

}  // namespace conveyor::cpu
