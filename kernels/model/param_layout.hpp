#pragma once
// What parameters a stage holds, without holding them: names, shapes, weight decay and how
// each is initialised, in GptStage's fixed global order (embedding, blocks by index, final
// norm, head), each part's as its architecture's layer declares them (gpt2_layers.hpp,
// llama_layers.hpp; stage_parts.hpp walks them). GptStage builds its parameters from this
// list, so the two cannot disagree;
// a reader that needs only names and shapes (resume's check of a checkpoint against the
// partition of every stage) gets them without allocating or drawing gigabytes of weights.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/stage_slice.hpp"
#include "kernels/tensor/shape.hpp"

namespace conveyor {

struct ParamLayout {
  enum class Init { normal, constant };
  std::string name;
  Shape shape;
  bool decay = true;  // AdamW's weight decay applies (false for norms, biases, embeddings)
  Init init = Init::constant;
  double stddev = 0.0;  // Init::normal: Normal(0, stddev) of the stream `stream`
  std::string stream;   // the name whose stream it draws: its own, or wte.weight for a tied head
  float value = 0.0f;   // Init::constant
};

/// The parameters of `slice` of the model `config`.
/// REQUIRES: a config and slice GptStage accepts (it validates before calling this).
std::vector<ParamLayout> stage_param_layout(const GptConfig& config, const StageSlice& slice);

}  // namespace conveyor
