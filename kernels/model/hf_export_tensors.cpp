#include "kernels/model/hf_export_tensors.hpp"

#include <map>
#include <set>
#include <string>

#include "kernels/common/error.hpp"
#include "kernels/model/hf_names.hpp"

namespace conveyor {

std::vector<NamedTensor> hf_export_tensors(const GptConfig& model, const std::vector<NamedTensor>& params) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& p : params) by_name[p.name] = &p.tensor;
  const auto recipes = hf_param_recipes(model, hf_default_prefix(model.arch), model.seq_len);
  std::string problems;
  for (const auto& r : recipes) {
    const auto it = by_name.find(r.param);
    if (it == by_name.end())
      problems += (problems.empty() ? "" : "; ") + r.param + " is missing";
    else if (it->second->shape() != r.shape || it->second->dtype() != DType::f32)
      problems += (problems.empty() ? "" : "; ") + r.param + " is " + it->second->describe() + ", the model needs f32 " + r.shape.str();
  }
  if (!problems.empty()) throw InputError("the weights are not those of the model: " + problems);

  std::vector<NamedTensor> out;
  std::set<std::string> written;  // a tied head's source is the embedding, written already
  for (const auto& r : recipes) {
    auto sources = split_hf_recipe(r, *by_name.at(r.param));
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (written.insert(r.sources[i].name).second) out.push_back({r.sources[i].name, std::move(sources[i])});
  }
  return out;
}

}  // namespace conveyor
