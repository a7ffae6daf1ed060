#pragma once
// Softmax cross-entropy over the vocabulary, mean over the N = B*T tokens.
// Invariant: activations and the input gradient are written with =; no parameters.
// forward may run in place (probs == logits), and so may backward (dlogits == probs): the
// stash keeps one (N, V) buffer that holds logits, then probabilities, then dlogits.
// Per-row sums and the mean loss are accumulated in double, in order.
// REQUIRES: every target in [0, V) (the caller validates).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/vector_math.hpp"

namespace conveyor::cpu {

/// Returns the mean loss over the N rows.
template <class Real>
double cross_entropy_forward(Real* probs,                  // (N, V)
                             const Real* logits,           // (N, V)
                             const std::int32_t* targets,  // (N)
                             std::int64_t N, std::int64_t V) {
  double total = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* l = logits + n * V;  // (V)
    Real* p = probs + n * V;         // (V)
    Real mx = l[0];
    for (std::int64_t i = 1; i < V; ++i) mx = std::max(mx, l[i]);
    const double target_shifted = static_cast<double>(l[targets[n]] - mx);
    for (std::int64_t i = 0; i < V; ++i) p[i] = l[i] - mx;
    exp_in_place(p, V);
    double sum = 0;
    for (std::int64_t i = 0; i < V; ++i) sum += static_cast<double>(p[i]);
    const Real inv = static_cast<Real>(1.0 / sum);
    for (std::int64_t i = 0; i < V; ++i) p[i] *= inv;
    total += std::log(sum) - target_shifted;
  }
  return total / static_cast<double>(N);
}

/// dlogits = (probs - onehot(target)) * dloss, where dloss is d(total loss)/d(loss of one
/// row): loss_scale / N for a mean over N rows.
template <class Real>
void cross_entropy_backward_input(Real* dlogits,                // (N, V) =
                                  const Real* probs,            // (N, V)
                                  const std::int32_t* targets,  // (N)
                                  Real dloss, std::int64_t N, std::int64_t V) {
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* p = probs + n * V;  // (V)
    Real* d = dlogits + n * V;      // (V)
    const std::int64_t t = targets[n];
    for (std::int64_t i = 0; i < V; ++i) d[i] = (p[i] - (i == t ? Real(1) : Real(0))) * dloss;
  }
}

}  // namespace conveyor::cpu
