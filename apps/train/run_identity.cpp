#include "apps/train/run_identity.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>

#include "apps/config/config_keys.hpp"
#include "apps/text/message_text.hpp"

namespace conveyor {
namespace {

// Sections whose every key is identity, and the keys of them that are not. precision.*
// changes the arithmetic of every GEMM (FP8 against bf16).
constexpr std::array<std::string_view, 4> kIdentitySections = {"model.", "data.", "train.",
                                                               "precision."};
constexpr std::array<std::string_view, 8> kFreeKeys = {
    "model.recompute",    // recomputing activations changes no bit
    "precision.fp8_fused_casts",  // the same FP8 codes, made in another kernel
    "train.steps",        // a resume goes further
    "train.eval_every",   // evaluation reads the weights, never writes them
    "train.eval_batches",
    "train.sample_every",  // samples read a checkpoint, never the run
    "train.sample_prompt",
    "train.sample_tokens",
};
// Identity keys of other sections: the global batch and the arithmetic of the update.
constexpr std::array<std::string_view, 4> kOtherIdentityKeys = {
    "pipeline.micro_batches", "pipeline.micro_batch_size", "optim.master", "optim.grad_dtype"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

std::string yaml_text(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

}  // namespace

bool is_identity_key(std::string_view key) {
  if (listed(kFreeKeys, key)) return false;
  if (listed(kOtherIdentityKeys, key)) return true;
  return std::any_of(kIdentitySections.begin(), kIdentitySections.end(),
                     [&](std::string_view section) { return key.starts_with(section); });
}

std::vector<std::string> identity_differences(const RunConfig& then, const RunConfig& now) {
  std::vector<std::string> out;
  for (const auto& key : config_keys()) {
    if (!is_identity_key(key.name)) continue;
    const std::string a = yaml_text(key.get(then)), b = yaml_text(key.get(now));
    if (a != b)
      out.push_back(fmt::format("{} {} (checkpoint) vs {} (this run)", key.name, printable_excerpt(a),
                                printable_excerpt(b)));
  }
  return out;
}

}  // namespace conveyor
