#include "kernels/model/hf_weights.hpp"

#include <set>

#include "kernels/common/error.hpp"
#include "kernels/model/hf_names.hpp"

namespace conveyor {
namespace {

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// GPT-2's original upload has no "transformer." prefix: the folder's own names decide.
std::string prefix_of(const HfFolder& folder, ModelArch arch) {
  const std::string standard = hf_default_prefix(arch);
  if (arch == ModelArch::gpt2 && !folder.tensors().count(standard + "wte.weight") && folder.tensors().count("wte.weight"))
    return "";
  return standard;
}

std::string joined(const std::vector<std::string>& items, std::size_t most = 8) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > most) out += ", ... (" + std::to_string(items.size()) + " in all)";
  return out;
}

}  // namespace

HfWeights read_hf_weights(const HfFolder& folder, std::int64_t seq_len_cap) {
  HfWeights out;
  out.config = parse_hf_config(folder.config(), folder.dir() + "/" + kHfConfigFile, seq_len_cap);
  const GptConfig& c = out.config.model;
  out.prefix = prefix_of(folder, c.arch);
  const auto recipes = hf_param_recipes(c, out.prefix, out.config.max_positions);

  std::vector<std::string> missing, mismatched, unexpected;
  std::set<std::string> used;
  for (const auto& r : recipes)
    for (const auto& s : r.sources) {
      used.insert(s.name);
      const auto it = folder.tensors().find(s.name);
      if (it == folder.tensors().end())
        missing.push_back(s.name + " (for " + r.param + ")");
      else if (it->second.shape != s.shape)
        mismatched.push_back(s.name + " is " + shape_text(it->second.shape) + ", the config needs " +
                             shape_text(s.shape));
    }
  for (const auto& [name, info] : folder.tensors()) {
    if (used.count(name)) continue;
    if (hf_ignorable_tensor(c, out.prefix, name)) out.ignored.push_back(name);
    else unexpected.push_back(name);
  }
  std::string problems;
  auto add = [&](const char* what, const std::vector<std::string>& items) {
    if (!items.empty()) problems += std::string(problems.empty() ? "" : "; ") + what + ": " + joined(items);
  };
  add("missing tensors", missing);
  add("shape mismatch", mismatched);
  add(("tensors a " + out.config.architecture + " has no place for").c_str(), unexpected);
  if (!problems.empty()) throw InputError(folder.dir() + ": " + problems);

  std::set<std::string> counted;  // a tied embedding is read twice, counted once
  for (const auto& r : recipes) {
    std::vector<Tensor> sources;
    for (const auto& s : r.sources) {
      sources.push_back(folder.read_f32(s.name));
      if (counted.insert(s.name).second) ++out.dtypes[folder.tensors().at(s.name).dtype];
    }
    out.params.push_back({r.param, apply_hf_recipe(r, sources)});
  }
  return out;
}

}  // namespace conveyor
