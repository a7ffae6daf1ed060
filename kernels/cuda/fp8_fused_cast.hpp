#pragma once
// FP8 casts fused into the element-wise kernels that produce the data (issue 43, item 2):
// GELU and SwiGLU, forward and input-backward, write their bf16 output as the stand-alone
// kernels do (gelu.hpp, swiglu.hpp) and, in the same pass, its amax and (given a scale) its
// FP8 codes and their transpose, as fp8_cast.hpp's cast_transpose_to_fp8 would make them
// from that output. The next linear layer's GEMM reads the codes (stage_linears.hpp), so
// the output is not read again to be cast: under delayed scaling (the scale known before
// the data) nothing is read again; under dynamic scaling the separate amax pass goes and
// the cast still reads the output once (its scale needs the whole tensor's amax first).
// What must hold: y, the codes and the amax are bit for bit those of the stand-alone
// kernel followed by the stand-alone cast (tested); deterministic (the amax is an
// order-free integer max).
#include <cstdint>

#include "kernels/cuda/fp8_cast.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor {

struct Fp8Producer {
  enum class Op { gelu, gelu_backward, swiglu, swiglu_backward };
  Op op = Op::gelu;
  /// The output, (rows, cols); null: not written (produce_fp8 with a scale: the codes are
  /// all that is wanted of it).
  bf16* y = nullptr;
  /// gelu: the pre-activation (rows, cols); gelu_backward: the output's gradient dy
  /// (rows, cols), which may be y itself; swiglu: gate_up (rows, 2·cols), rows [gate | up];
  /// swiglu_backward: dy (rows, cols / 2).
  const bf16* a = nullptr;
  /// gelu_backward: the pre-activation (rows, cols); swiglu_backward: gate_up (rows, cols),
  /// and y is then [d gate | d up]. Unused otherwise.
  const bf16* b = nullptr;
};

/// Runs the producer over (rows, cols) outputs, writing y; amax[0] = max |y| when `amax` is
/// given; out = fp8(y · scale[0]) (rows, cols) and out_t its transpose when `scale` is given
/// (either may be null). `scale` and `amax` live on the device.
/// REQUIRES: swiglu_backward's cols even; y does not alias b, nor (swiglu) a; y given
/// unless `scale` is (the output must go somewhere).
void produce_fp8(const Fp8Producer& p, int rows, int cols, std::uint8_t* out, std::uint8_t* out_t,
                 const float* scale, float* amax, Fp8Kind kind, cudaStream_t stream);

/// The producer alone, by its stand-alone kernel (gelu.hpp, swiglu.hpp): the unfused path.
void produce(const Fp8Producer& p, int rows, int cols, cudaStream_t stream);

}  // namespace conveyor
