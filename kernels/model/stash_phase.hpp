#pragma once
// Where one micro-batch's stash is in its life: forward → backward_input → backward_weight.
// Both stage models (CPU and CUDA) refuse a stash made by another model or used out of
// order, with the same words.
#include <stdexcept>
#include <string>

#include "kernels/model/gpt_stage.hpp"

namespace conveyor {

enum class StashPhase { forward_done, input_done, weight_done };

inline const char* stash_phase_name(StashPhase p) {
  switch (p) {
    case StashPhase::forward_done: return "after forward";
    case StashPhase::input_done: return "after backward_input";
    case StashPhase::weight_done: return "after backward_weight (spent)";
  }
  return "?";
}

/// `stash` as the model's own stash type, checked: made by `owner` (invalid_argument
/// otherwise) and in phase `want` (logic_error otherwise). `who` names the method, e.g.
/// "GptStage::backward_input". REQUIRES: Own has members `owner` and `phase`.
template <class Own>
Own& own_stash(StageStash& stash, const void* owner, StashPhase want, const std::string& who) {
  auto* s = dynamic_cast<Own*>(&stash);
  if (!s || s->owner != owner)
    throw std::invalid_argument(who + ": the stash was not made by this model");
  if (s->phase != want)
    throw std::logic_error(who + ": the stash is " + stash_phase_name(s->phase) +
                           ", expected " + stash_phase_name(want));
  return *s;
}

/// Bytes of the tensors a model's stash still holds, and dropping them all, for a stash of
/// GPT-2 blocks (the CUDA model's; the CPU's walks its layers' activations, gpt_stage.cpp).
/// REQUIRES: Own has `tokens`, `d_embed`, `blocks` (each with all(),
/// the block's tensors) and `head` (targets, x, lnf, lnf_mean, lnf_rstd, logits, d_lnf).
template <class Own>
std::size_t stash_bytes(const Own& s) {
  auto held = [](const Tensor& t) -> std::size_t { return t.defined() ? t.bytes() : 0; };
  std::size_t n = held(s.tokens) + held(s.d_embed);
  for (const auto& block : s.blocks)
    for (const Tensor* t : block.all()) n += held(*t);
  const auto& h = s.head;
  for (const Tensor* t : {&h.targets, &h.x, &h.lnf, &h.lnf_mean, &h.lnf_rstd, &h.logits, &h.d_lnf})
    n += held(*t);
  return n;
}

template <class Own>
void release_stash(Own& s) {
  s.tokens = {};
  s.d_embed = {};
  s.blocks.clear();
  s.head = {};
}

}  // namespace conveyor
