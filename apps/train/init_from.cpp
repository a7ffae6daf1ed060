#include "apps/train/init_from.hpp"

#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>

#include "apps/hf/model_weights.hpp"
#include "apps/train/model_match.hpp"
#include "kernels/common/error.hpp"
#include "kernels/model/param_layout.hpp"

namespace conveyor {
namespace {

// The parameter `want` of a stage from the whole model's `have`: itself, or for GPT-2's
// wpe its first rows when this run's seq_len is shorter (model_differences allowed it).
Tensor fitted(const Tensor& have, const ParamLayout& want) {
  if (have.shape() == want.shape) return have;
  if (want.name != "wpe.weight" || want.shape.rank() != 2 || have.shape().rank() != 2 ||
      want.shape[1] != have.shape()[1] || want.shape[0] > have.shape()[0])
    throw std::logic_error(fmt::format("--init-from: {} is {}, the stage needs {}", want.name, have.describe(),
                                       want.shape.str()));
  Tensor out = Tensor::uninitialized(want.shape);
  std::memcpy(out.f32(), have.f32(), out.bytes());  // the first rows are the first bytes
  return out;
}

}  // namespace

InitFrom load_init_from(const std::string& path, const RunConfig& config, const JobPlan& plan,
                        const std::set<int>& here) {
  ModelWeights w = read_model_weights(path, "--init-from");
  const auto diff = model_differences(w.model, config.model, "weights", SeqLenRule::fits_in);
  if (!diff.empty())
    throw InputError(fmt::format("--init-from {}: the weights are another model than this config's: {}", path,
                                 fmt::join(diff, ", ")));
  std::map<std::string, Tensor> by_name;
  for (auto& t : w.weights) by_name.emplace(t.name, std::move(t.tensor));

  auto out = std::make_shared<ResumeSource>();
  out->path = w.path;
  out->description = "initialising the weights from " + w.description + " (a new run: step 0, AdamW fresh)";
  out->manifest.step = 0;
  out->manifest.optimizer_steps = 0;
  out->manifest.seed = config.train.seed;
  out->slices.resize(static_cast<std::size_t>(plan.placement.model_stages()));
  for (const auto& rank : plan.placement.ranks)
    for (const auto& c : rank.chunks) out->slices.at(static_cast<std::size_t>(c.model_stage)) = c.slice;
  out->tensors.resize(out->slices.size());
  for (int s : here)
    for (const auto& p : stage_param_layout(plan.model, out->slices.at(static_cast<std::size_t>(s)))) {
      const auto it = by_name.find(p.name);
      if (it == by_name.end())  // model_differences passed: the same model has the same names
        throw std::logic_error(fmt::format("--init-from {}: no {} in the weights", path, p.name));
      out->tensors[static_cast<std::size_t>(s)].push_back({p.name, fitted(it->second, p)});
    }
  return {out, source_name(w.source), w.step};
}

}  // namespace conveyor
