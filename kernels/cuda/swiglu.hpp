#pragma once
// SwiGLU on the device (kernels/cpu/swiglu.hpp): out = silu(gate) * up over one fused
// activation whose row n is [gate (F) | up (F)] (the output of gate_proj's rows stacked on
// up_proj's in one GEMM), fp32 math on bf16 storage.
// Invariant: out and every element of dgate_up are written with =. out must not alias
// gate_up, nor dgate_up dout. The stand-alone kernels; a GEMM epilogue that fuses SwiGLU
// is the fast path to come, and these are its reference.
#include <cstdint>

#include "kernels/cuda/types.hpp"

namespace conveyor {

void swiglu_forward(bf16* out,            // (N, F)
                    const bf16* gate_up,  // (N, 2F) rows [gate | up]
                    std::int64_t N, std::int64_t F, cudaStream_t stream);

void swiglu_backward_input(bf16* dgate_up,       // (N, 2F) =, rows [dgate | dup]
                           const bf16* dout,     // (N, F)
                           const bf16* gate_up,  // (N, 2F)
                           std::int64_t N, std::int64_t F, cudaStream_t stream);

}  // namespace conveyor
