#pragma once
// Where a GPT-2 slice's block parameters sit in its params() list, shared by the CPU
// GptStage (gpt2_layers.cpp: a parameter's place within its half) and the CUDA stage model
// (which copies GptStage's list): after the embedding's two (when the slice has it), each
// held block's attention-half parameters then its MLP-half ones, then the head's. What must
// hold: the CUDA model indexes parameters through these functions only, and
// param_layout_test checks them against the CPU layout, so the two cannot disagree about a
// slice cut between a block's halves (stage_slice.hpp). (GPT-2 only: the CUDA model has no
// Llama yet.)
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

/// Index in params() of the first block parameter (wte and wpe come first).
inline std::size_t block_base(const StageSlice& s) { return s.has_embedding ? 2 : 0; }

/// Index in params() of the head's first parameter (ln_f.weight).
inline std::size_t head_base(const StageSlice& s) {
  return block_base(s) + kParamsPerHalf * static_cast<std::size_t>(s.num_halves());
}

/// Index in params() of parameter k of the slice's local block j.
/// REQUIRES: the slice holds the half of that block that k belongs to.
inline std::size_t block_param(const StageSlice& s, int local_block, BlockParam k) {
  return block_base(s) + kParamsPerBlock * static_cast<std::size_t>(local_block) + k -
         (s.starts_at_mlp ? kParamsPerHalf : 0);
}

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
