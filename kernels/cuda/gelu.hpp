#pragma once
// GELU (tanh approximation, as kernels/cpu/gelu.hpp) on bf16, computed in fp32.
// The GEMMs fuse GELU into their epilogues (gemm.hpp); these stand-alone kernels are the
// unfused path and the reference the fused path is tested against.
// Invariant: outputs and the input gradient are written with =; both may run in place.
#include "kernels/cuda/types.hpp"

namespace conveyor {

void gelu_forward(bf16* out,        // (n)
                  const bf16* inp,  // (n)
                  std::int64_t n, cudaStream_t stream);

void gelu_backward_input(bf16* dinp,        // (n) =, may alias dout
                         const bf16* dout,  // (n)
                         const bf16* inp,   // (n) the GELU's input (pre-activation)
                         std::int64_t n, cudaStream_t stream);

}  // namespace conveyor
