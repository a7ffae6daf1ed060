#include "kernels/model/param_layout.hpp"

#include "kernels/model/gpt2_layers.hpp"
#include "kernels/model/stage_parts.hpp"

namespace conveyor {

std::vector<ParamLayout> stage_param_layout(const GptConfig& c, const StageSlice& s) {
  return layout_stage_parts<gpt2::Layers>(c, s, [](StagePart, int, std::size_t) {});
}

}  // namespace conveyor
