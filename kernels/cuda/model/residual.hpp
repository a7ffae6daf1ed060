#pragma once
// The residual add that ends a stage's last block: out = bf16(a + b), added in fp32.
// Inside a stage the add is fused into the next LayerNorm (residual_layernorm_forward),
// which rounds the same way (to_bf16(to_float(a) + to_float(b))), so a block's output has
// the same bits whether it ends a stage or feeds the next block of the same stage.
// Invariant: the output is written with =; it may alias a or b.
#include "kernels/cuda/types.hpp"

namespace conveyor {

void residual_forward(bf16* out,      // (n)
                      const bf16* a,  // (n)
                      const bf16* b,  // (n)
                      std::int64_t n, cudaStream_t stream);

}  // namespace conveyor
