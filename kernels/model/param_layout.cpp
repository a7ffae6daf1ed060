#include "kernels/model/param_layout.hpp"

#include "kernels/model/gpt2_layers.hpp"
#include "kernels/model/llama_layers.hpp"
#include "kernels/model/stage_parts.hpp"

namespace conveyor {

std::vector<ParamLayout> stage_param_layout(const GptConfig& c, const StageSlice& s) {
  const auto nothing = [](StagePart, int, std::size_t) {};
  switch (c.arch) {
    case ModelArch::gpt2: return layout_stage_parts<gpt2::Layers>(c, s, nothing);
    case ModelArch::llama: return layout_stage_parts<llama::Layers>(c, s, nothing);
  }
  return {};
}

}  // namespace conveyor
