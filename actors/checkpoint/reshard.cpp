#include "actors/checkpoint/reshard.hpp"

#include <set>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/tensor_names.hpp"

namespace conveyor::checkpoint {
namespace {

constexpr std::size_t kMaxListed = 20;

std::string join_problems(const std::vector<std::string>& problems) {
  std::string out = std::to_string(problems.size()) + " problem(s) loading into the new partition: ";
  for (std::size_t i = 0; i < problems.size() && i < kMaxListed; ++i) out += (i ? "; " : "") + problems[i];
  if (problems.size() > kMaxListed) out += "; ... (" + std::to_string(problems.size() - kMaxListed) + " more)";
  return out;
}

}  // namespace

std::vector<TensorSpec> specs_of(const std::vector<Param>& params) {
  std::vector<TensorSpec> out;
  out.reserve(params.size());
  for (const auto& p : params) out.push_back({p.name, p.value.shape(), p.value.dtype()});
  return out;
}

std::vector<TensorSpec> specs_of(const std::vector<ParamLayout>& layout) {
  std::vector<TensorSpec> out;
  out.reserve(layout.size());
  for (const auto& p : layout) out.push_back({p.name, p.shape, DType::f32});
  return out;
}

std::vector<std::vector<std::string>> plan_reshard(const TensorCatalog& catalog,
                                                   const std::vector<std::vector<TensorSpec>>& stages,
                                                   const std::string& where) {
  // Which state kinds the checkpoint holds at all: those must then exist for every param.
  std::vector<std::string_view> kinds;
  for (auto prefix : kStatePrefixes)
    for (const auto& [name, spec] : catalog)
      if (std::string_view(name).starts_with(prefix)) {
        kinds.push_back(prefix);
        break;
      }

  std::vector<std::string> problems;
  std::set<std::string> taken;
  std::map<std::string, std::size_t> owner;  // parameter -> new stage
  std::vector<std::vector<std::string>> out(stages.size());
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const std::string stage = "new stage " + std::to_string(k);
    for (const auto& spec : stages[k]) {
      if (auto [it, fresh] = owner.emplace(spec.name, k); !fresh) {
        problems.push_back("parameter " + spec.name + " asked for by new stages " + std::to_string(it->second) +
                           " and " + std::to_string(k));
        continue;
      }
      std::vector<std::string> names = {spec.name};
      for (auto prefix : kinds) names.push_back(std::string(prefix) + spec.name);
      for (const auto& name : names) {
        auto it = catalog.find(name);
        if (it == catalog.end()) {
          problems.push_back("missing tensor " + name + " (" + stage + ")");
          continue;
        }
        taken.insert(name);
        if (it->second.shape != spec.shape) {
          problems.push_back("shape mismatch for " + name + ": checkpoint " + it->second.shape.str() + ", " +
                             stage + " expects " + spec.shape.str());
          continue;
        }
        if (it->second.dtype != spec.dtype) {
          problems.push_back("dtype mismatch for " + name + ": checkpoint " +
                             std::string(dtype_name(it->second.dtype)) + ", " + stage + " expects " +
                             std::string(dtype_name(spec.dtype)));
          continue;
        }
        out[k].push_back(name);
      }
    }
  }
  for (const auto& [name, spec] : catalog)
    if (!taken.count(name)) problems.push_back("extra tensor " + name + " (no new stage holds it)");
  if (!problems.empty()) throw CheckpointError(where, join_problems(problems));
  return out;
}

std::vector<std::vector<NamedTensor>> reshard(const std::map<std::string, Tensor>& tensors,
                                              const std::vector<std::vector<TensorSpec>>& stages,
                                              const std::string& where) {
  TensorCatalog catalog;
  for (const auto& [name, t] : tensors) catalog.emplace(name, TensorSpec{name, t.shape(), t.dtype()});
  const auto plan = plan_reshard(catalog, stages, where);
  std::vector<std::vector<NamedTensor>> out(plan.size());
  for (std::size_t k = 0; k < plan.size(); ++k)
    for (const auto& name : plan[k]) out[k].push_back({name, tensors.at(name)});
  return out;
}

}  // namespace conveyor::checkpoint
