#include "kernels/model/param_state.hpp"

#include <cstring>
#include <map>
#include <string>

#include "kernels/model/state_names.hpp"

namespace conveyor {
namespace {

// A moment in its parameter's shape: a clone, or with a shard zeros with the
// shard's part copied in.
Tensor whole_moment(const Tensor& moment, const Tensor& value,
                    const std::optional<ElementRange>& shard, std::int64_t offset) {
  if (!shard) return moment.clone();
  Tensor out = Tensor::zeros(value.shape());
  const ElementRange mine = local_overlap(*shard, offset, value.numel());
  if (mine.size() > 0)
    std::memcpy(out.f32() + mine.begin, moment.f32(), sizeof(float) * mine.size());
  return out;
}

// The shard's part of a whole moment (a clone without a shard).
Tensor shard_of(const Tensor& whole, const std::optional<ElementRange>& shard,
                std::int64_t offset) {
  if (!shard) return whole.clone();
  const ElementRange mine = local_overlap(*shard, offset, whole.numel());
  Tensor out = Tensor::zeros({mine.size()});
  if (mine.size() > 0)
    std::memcpy(out.f32(), whole.f32() + mine.begin, sizeof(float) * mine.size());
  return out;
}

}  // namespace

std::vector<NamedTensor> capture_param_state(const std::vector<Param>& params,
                                             const AdamWState& state) {
  const bool with_opt = !state.m.empty();
  if (with_opt && (state.m.size() != params.size() || state.v.size() != params.size()))
    throw std::invalid_argument("capture_param_state: optimizer state holds " +
                                std::to_string(state.m.size()) + " moments for " +
                                std::to_string(params.size()) + " parameters");
  std::vector<NamedTensor> out;
  out.reserve(params.size() * (with_opt ? 3 : 1));
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& value = params[i].value;
    out.push_back({params[i].name, value.clone()});
    if (with_opt) {
      out.push_back(
          {opt_m_name(params[i].name), whole_moment(state.m[i], value, state.shard, offset)});
      out.push_back(
          {opt_v_name(params[i].name), whole_moment(state.v[i], value, state.shard, offset)});
    }
    offset += value.numel();
  }
  return out;
}

void restore_param_state(const std::vector<NamedTensor>& tensors, std::vector<Param>& params,
                         AdamWState& state, std::int64_t optimizer_steps) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t.tensor;
  auto find = [&](const std::string& name, const Tensor& like) -> const Tensor& {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw StateMismatch("missing tensor " + name);
    if (it->second->shape() != like.shape() || it->second->dtype() != like.dtype())
      throw StateMismatch("tensor " + name + " is " + it->second->describe() +
                          ", the stage needs " + like.describe());
    return *it->second;
  };
  const bool with_opt = !params.empty() && by_name.count(opt_m_name(params.front().name));
  // Check everything before changing anything, so a failed restore leaves the
  // stage as it was.
  for (const auto& p : params) {
    find(p.name, p.value);
    if (with_opt) {
      find(opt_m_name(p.name), p.value);
      find(opt_v_name(p.name), p.value);
    }
  }
  AdamWState restored;
  restored.shard = state.shard;
  std::int64_t offset = 0;
  for (auto& p : params) {
    std::memcpy(p.value.raw(), find(p.name, p.value).raw(), p.value.bytes());
    if (with_opt) {
      restored.m.push_back(shard_of(find(opt_m_name(p.name), p.value), state.shard, offset));
      restored.v.push_back(shard_of(find(opt_v_name(p.name), p.value), state.shard, offset));
    }
    offset += p.value.numel();
  }
  restored.t = with_opt ? optimizer_steps : 0;
  state = std::move(restored);
}

}  // namespace conveyor
