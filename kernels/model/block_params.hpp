#pragma once
// A GPT-2 block's parameters, in the order of its halves' layouts (gpt2_layers.cpp declares
// them so; the CUDA model's gpt2_cuda_layers.cpp reads a half's parameter k at the half's
// first position, stage_parts.hpp's stage_part_firsts, plus k % kParamsPerHalf), and the
// rule every model applies to a slice's half-block cuts. param_layout_test checks the
// order against the CPU layout.
#include <cstddef>
#include <optional>
#include <string>

#include "kernels/model/stage_slice.hpp"

namespace conveyor {

// The parameters of one block, in params() order: the attention half's six, then the MLP's.
// clang-format off
enum BlockParam : std::size_t {
  ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b,
  kParamsPerBlock
};
// clang-format on
constexpr std::size_t kParamsPerHalf = kParamsPerBlock / 2;

/// Why a slice's half-block cuts make no model, or nothing: a slice that holds no half
/// block, an embedding slice that starts at an MLP half, a head slice that ends after an
/// attention half.
inline std::optional<std::string> half_cut_problem(const StageSlice& s) {
  const std::string blocks =
      "blocks [" + std::to_string(s.first_block) + ", " + std::to_string(s.end_block()) + ")";
  if ((s.starts_at_mlp || s.ends_after_attention) && s.num_halves() < 1)
    return blocks + " with" + (s.starts_at_mlp ? " starts_at_mlp" : "") +
           (s.starts_at_mlp && s.ends_after_attention ? " and" : "") +
           (s.ends_after_attention ? " ends_after_attention" : "") + " hold " +
           std::to_string(s.num_halves()) +
           " block halves; a slice that starts at a block's MLP half or ends after its "
           "attention half must hold at least one half block";
  if (s.has_embedding && s.starts_at_mlp)
    return "the embedding's slice must start at block " + std::to_string(s.first_block) +
           "'s attention half";
  if (s.has_head && s.ends_after_attention)
    return "the head's slice must end after block " + std::to_string(s.end_block() - 1) +
           "'s MLP half";
  return std::nullopt;
}

}  // namespace conveyor
