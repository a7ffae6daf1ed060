#pragma once
// The parts of a stage, in params() order: the embedding (when the slice has it), each held
// half block by block (attention half, then MLP half), the head (when the slice has it).
// The one walk both stage_param_layout and GptStage's layers follow, so a layer's first
// parameter is where the layout put it. `Layers` is an architecture (gpt2::Layers,
// llama::Layers): its Embedding, AttentionHalf, MlpHalf and Head each declare their
// parameters with a static layout().
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/stage_slice.hpp"

namespace conveyor {

enum class StagePart { embedding, attention_half, mlp_half, head };

/// The slice's parameter layout; `at(part, block, first)` is called before each part's
/// parameters are appended, with `first` their position (block -1 for embedding and head).
template <class Layers, class At>
std::vector<ParamLayout> layout_stage_parts(const GptConfig& c, const StageSlice& s, At&& at) {
  std::vector<ParamLayout> out;
  if (s.has_embedding) {
    at(StagePart::embedding, -1, out.size());
    Layers::Embedding::layout(c, out);
  }
  for (int b = s.first_block; b < s.end_block(); ++b) {
    if (s.holds_attention(b)) {
      at(StagePart::attention_half, b, out.size());
      Layers::AttentionHalf::layout(c, b, out);
    }
    if (s.holds_mlp(b)) {
      at(StagePart::mlp_half, b, out.size());
      Layers::MlpHalf::layout(c, b, out);
    }
  }
  if (s.has_head) {
    at(StagePart::head, -1, out.size());
    Layers::Head::layout(c, out);
  }
  return out;
}

/// Where each part's parameters begin in the slice's params() list (the walk above), for a
/// model that indexes them by position (the CUDA stage model): `attention[j]` and `mlp[j]`
/// for the slice's local block j (kAbsent when the slice does not hold that half), `end` the
/// list's size.
struct StagePartFirsts {
  static constexpr std::size_t kAbsent = std::numeric_limits<std::size_t>::max();
  std::size_t embedding = kAbsent, head = kAbsent, end = 0;
  std::vector<std::size_t> attention, mlp;
  /// The first parameter of local block j (its attention half's, or a lone MLP half's),
  /// and one past its last: its gradients are the contiguous span [block_begin, block_end).
  std::size_t block_begin(int j) const {
    const auto b = static_cast<std::size_t>(j);
    return attention[b] != kAbsent ? attention[b] : mlp[b];
  }
  std::size_t block_end(int j) const {
    const auto b = static_cast<std::size_t>(j) + 1;
    if (b < attention.size()) return block_begin(static_cast<int>(b));
    return head != kAbsent ? head : end;
  }
};

template <class Layers>
StagePartFirsts stage_part_firsts(const GptConfig& c, const StageSlice& s) {
  StagePartFirsts f;
  f.attention.assign(static_cast<std::size_t>(s.num_blocks), StagePartFirsts::kAbsent);
  f.mlp = f.attention;
  const auto params = layout_stage_parts<Layers>(c, s, [&](StagePart part, int block, std::size_t first) {
    const auto j = static_cast<std::size_t>(block - s.first_block);
    switch (part) {
      case StagePart::embedding: f.embedding = first; break;
      case StagePart::attention_half: f.attention[j] = first; break;
      case StagePart::mlp_half: f.mlp[j] = first; break;
      case StagePart::head: f.head = first; break;
    }
  });
  f.end = params.size();
  return f;
}

}  // namespace conveyor
