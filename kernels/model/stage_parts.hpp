#pragma once
// The parts of a stage, in params() order: the embedding (when the slice has it), each held
// half block by block (attention half, then MLP half), the head (when the slice has it).
// The one walk both stage_param_layout and GptStage's layers follow, so a layer's first
// parameter is where the layout put it. `Layers` is an architecture (gpt2::Layers,
// llama::Layers): its Embedding, AttentionHalf, MlpHalf and Head each declare their
// parameters with a static layout().
#include <cstddef>
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

}  // namespace conveyor
