#include "apps/config/precision_recipe.hpp"

#include <fmt/format.h>

namespace conveyor {

std::string precision_recipe(const PrecisionSection& p) {
  if (p.matmul == MatmulPrecision::bf16) return "bf16";
  std::string scaling = fmt::format("{} scaling", enum_name(p.fp8_scaling));
  if (p.fp8_scaling == Fp8Scaling::delayed)
    scaling += fmt::format(" over {} steps", p.amax_history);
  return fmt::format("fp8 (e4m3 activations and weights, {} gradients, {}{}{})",
                     enum_name(p.fp8_grad), scaling, p.fp8_head ? ", LM head too" : "",
                     p.fp8_fused_casts ? "" : ", casts not fused");
}

}  // namespace conveyor
