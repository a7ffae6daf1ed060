#pragma once
// Residual connection: out = a + b. Its backward is the identity on both inputs, which the
// callers fold in by seeding the input gradient with dout (see layernorm_backward_input).
// Invariant: activations are written with =; out may alias a or b.
#include <cstdint>

namespace conveyor::cpu {

template <class Real>
void residual_forward(Real* out,      // (N)
                      const Real* a,  // (N)
                      const Real* b,  // (N)
                      std::int64_t N) {
  for (std::int64_t i = 0; i < N; ++i) out[i] = a[i] + b[i];
}

}  // namespace conveyor::cpu
