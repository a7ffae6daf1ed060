// stage_param_layout against what GptStage holds: the resume checks a checkpoint against
// the layout alone, so the two must agree in names, order, shapes and weight decay, for
// whole and half blocks and a tied head; and a partition's layouts together are the whole
// model's, each parameter once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/model/block_params.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/param_layout.hpp"

using namespace conveyor;

namespace {

void check_matches_stage(const GptConfig& config, const StageSlice& slice) {
  const auto layout = stage_param_layout(config, slice);
  const GptStage stage(config, slice, /*seed=*/11);
  REQUIRE(layout.size() == stage.params().size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const Param& p = stage.params()[i];
    INFO(p.name);
    CHECK(layout[i].name == p.name);
    CHECK(layout[i].shape == p.value.shape());
    CHECK(layout[i].decay == p.decay);
    // A constant parameter holds its value everywhere; a drawn one does not.
    const bool all_equal = std::all_of(p.value.f32_span().begin(), p.value.f32_span().end(),
                                       [&](float x) { return x == p.value.f32()[0]; });
    CHECK(all_equal == (layout[i].init == ParamLayout::Init::constant));
    if (layout[i].init == ParamLayout::Init::constant) CHECK(p.value.f32()[0] == layout[i].value);
  }
}

}  // namespace

TEST_CASE("the layout is what GptStage holds, for whole blocks, half blocks and a tied head") {
  GptConfig config{/*layers=*/4, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};
  const int halves = 2 * static_cast<int>(config.layers);
  for (bool tied : {false, true}) {
    config.tie_embeddings = tied;
    CAPTURE(tied);
    check_matches_stage(config, StageSlice::of_halves(0, halves, true, true));
    check_matches_stage(config, StageSlice::of_halves(0, 3, true, false));        // ends after an attention half
    check_matches_stage(config, StageSlice::of_halves(3, 2, false, false));       // MLP half, then a block's attention
    check_matches_stage(config, StageSlice::of_halves(5, halves - 5, false, true));
  }
}

TEST_CASE("a partition's layouts together are the one-stage layout, in order, each parameter once") {
  const GptConfig config{/*layers=*/3, /*d_model=*/16, /*heads=*/2, /*seq_len=*/8, /*vocab=*/32};
  const auto whole = stage_param_layout(config, StageSlice::of_halves(0, 6, true, true));
  std::vector<std::string> joined;
  for (const auto& slice : {StageSlice::of_halves(0, 1, true, false), StageSlice::of_halves(1, 2, false, false),
                            StageSlice::of_halves(3, 3, false, true)})
    for (const auto& p : stage_param_layout(config, slice)) joined.push_back(p.name);
  std::vector<std::string> names;
  for (const auto& p : whole) names.push_back(p.name);
  CHECK(joined == names);
  CHECK(names.front() == "wte.weight");
  CHECK(names.back() == "lm_head.weight");
}

TEST_CASE("block_params.hpp, by which the CUDA model indexes, points at the GPT-2 layout's parameters") {
  const GptConfig config{/*layers=*/3, /*d_model=*/16, /*heads=*/2, /*seq_len=*/8, /*vocab=*/32};
  const char* const in_block[kParamsPerBlock] = {
      "ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
      "ln2.weight", "ln2.bias", "mlp.fc1.weight",  "mlp.fc1.bias",  "mlp.fc2.weight",   "mlp.fc2.bias"};
  for (const auto& slice : {StageSlice::of_halves(0, 6, true, true), StageSlice::of_halves(1, 4, false, false),
                            StageSlice::of_halves(3, 3, false, true)}) {
    const auto layout = stage_param_layout(config, slice);
    for (int j = 0; j < slice.num_blocks; ++j)
      for (std::size_t k = 0; k < kParamsPerBlock; ++k) {
        const int block = slice.first_block + j;
        if (!(k < kParamsPerHalf ? slice.holds_attention(block) : slice.holds_mlp(block))) continue;
        CAPTURE(block);
        CAPTURE(k);
        CHECK(layout.at(block_param(slice, j, static_cast<BlockParam>(k))).name ==
              "blocks." + std::to_string(block) + "." + in_block[k]);
      }
    if (slice.has_head) CHECK(layout.at(head_base(slice)).name == "ln_f.weight");
  }
}
