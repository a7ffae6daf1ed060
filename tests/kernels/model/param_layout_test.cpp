// stage_param_layout against what GptStage holds: the resume checks a checkpoint against
// the layout alone, so the two must agree in names, order, shapes and weight decay, for
// whole and half blocks and a tied head; and a partition's layouts together are the whole
// model's, each parameter once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/model/block_params.hpp"
#include "kernels/model/gpt2_layers.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/llama_layers.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/stage_parts.hpp"

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

// The CUDA model finds each part's parameters at stage_part_firsts' positions plus the
// parameter's place in its layer's layout (block_params.hpp's order for GPT-2,
// llama_cuda_layers.cpp's for Llama): both must name the CPU layout's parameters, for whole
// blocks, lone halves at either end, and the embedding and head slices.
TEST_CASE("stage_part_firsts, by which the CUDA model indexes, points at each layer's parameters") {
  GptConfig gpt{/*layers=*/3, /*d_model=*/16, /*heads=*/2, /*seq_len=*/8, /*vocab=*/32};
  GptConfig llama = gpt;
  llama.arch = ModelArch::llama;
  llama.kv_heads = 1;
  struct Arch {
    const GptConfig* config;
    std::vector<const char*> attention, mlp, head;
  };
  // GPT-2's halves placed by block_params.hpp's enum, as gpt2_cuda_layers.cpp reads them.
  std::vector<const char*> gpt_attention(kParamsPerHalf), gpt_mlp(kParamsPerHalf);
  const std::pair<BlockParam, const char*> gpt_names[] = {
      {ln1_w, "ln1.weight"},     {ln1_b, "ln1.bias"},           {qkv_w, "attn.qkv.weight"},
      {qkv_b, "attn.qkv.bias"},  {proj_w, "attn.proj.weight"},  {proj_b, "attn.proj.bias"},
      {ln2_w, "ln2.weight"},     {ln2_b, "ln2.bias"},           {fc1_w, "mlp.fc1.weight"},
      {fc1_b, "mlp.fc1.bias"},   {fc2_w, "mlp.fc2.weight"},     {fc2_b, "mlp.fc2.bias"}};
  for (const auto& [k, name] : gpt_names)
    (k < kParamsPerHalf ? gpt_attention : gpt_mlp)[k % kParamsPerHalf] = name;
  // Llama's in llama_cuda_layers.cpp's enums' order.
  const Arch archs[] = {
      {&gpt, gpt_attention, gpt_mlp, {"ln_f.weight", "ln_f.bias", "lm_head.weight"}},
      {&llama,
       {"attn_norm.weight", "attn.qkv.weight", "attn.o.weight"},
       {"mlp_norm.weight", "mlp.gate_up.weight", "mlp.down.weight"},
       {"norm_f.weight", "lm_head.weight"}}};
  for (const Arch& a : archs) {
    CAPTURE(model_arch_name(a.config->arch));
    for (const auto& slice :
         {StageSlice::of_halves(0, 6, true, true), StageSlice::of_halves(1, 4, false, false),
          StageSlice::of_halves(3, 3, false, true), StageSlice::of_halves(0, 1, true, false)}) {
      const auto layout = stage_param_layout(*a.config, slice);
      const StagePartFirsts f = a.config->arch == ModelArch::llama
                                    ? stage_part_firsts<llama::Layers>(*a.config, slice)
                                    : stage_part_firsts<gpt2::Layers>(*a.config, slice);
      CHECK(f.end == layout.size());
      if (slice.has_embedding) CHECK(layout.at(f.embedding).name == "wte.weight");
      for (int j = 0; j < slice.num_blocks; ++j) {
        const int block = slice.first_block + j;
        CAPTURE(block);
        const std::string prefix = "blocks." + std::to_string(block) + ".";
        const auto at = [&](std::size_t first, const std::vector<const char*>& names) {
          for (std::size_t k = 0; k < names.size(); ++k)
            CHECK(layout.at(first + k).name == prefix + names[k]);
        };
        CHECK((f.attention[std::size_t(j)] != StagePartFirsts::kAbsent) == slice.holds_attention(block));
        CHECK((f.mlp[std::size_t(j)] != StagePartFirsts::kAbsent) == slice.holds_mlp(block));
        if (slice.holds_attention(block)) at(f.attention[std::size_t(j)], a.attention);
        if (slice.holds_mlp(block)) at(f.mlp[std::size_t(j)], a.mlp);
        // A block's gradients are one span: its first parameter up to the next part's.
        CHECK(layout.at(f.block_begin(j)).name.rfind(prefix, 0) == 0);
        CHECK(layout.at(f.block_end(j) - 1).name.rfind(prefix, 0) == 0);
      }
      if (slice.has_head)
        for (std::size_t k = 0; k < a.head.size(); ++k)
          CHECK(layout.at(f.head + k).name == a.head[k]);
    }
  }
}
