#pragma once
// precision.matmul fp8's settings (issue 43), as a CUDA stage model takes them
// (cuda_stage_model.hpp's CudaStageOptions::fp8; stage_linears.hpp applies them).
#include "kernels/cuda/fp8_cast.hpp"

namespace conveyor {

struct Fp8Recipe {
  /// precision.fp8_grad: the output gradients' format (E5M2's range, or E4M3's precision).
  Fp8Kind grad = Fp8Kind::e5m2;
  /// precision.fp8_scaling: 0 is dynamic (each activation's and gradient's scale from its
  /// own amax); N > 0 is delayed, from the largest amax of the last N steps
  /// (precision.amax_history). Weights always scale dynamically: they are cast once a step.
  int delayed_history = 0;
  /// precision.fp8_fused_casts: the casts of GELU's and SwiGLU's outputs (forward) and input
  /// gradients (backward) made in those kernels' own pass (fp8_fused_cast.hpp) rather than
  /// by a cast of their finished output. The same codes either way; off measures the gain.
  bool fused_casts = true;
};

}  // namespace conveyor
