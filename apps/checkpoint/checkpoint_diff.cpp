#include "apps/checkpoint/checkpoint_diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "kernels/common/error.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/model/state_names.hpp"
#include "kernels/tensor/bf16.hpp"

namespace conveyor {
namespace {

// One side of the comparison: what it holds and how to read some of it.
struct Side {
  std::string path;
  std::int64_t step = -1;
  std::vector<std::vector<std::string>> groups;  // names as stored together (a shard, a file)
  checkpoint::TensorCatalog catalog;
  std::function<std::map<std::string, Tensor>(const std::set<std::string>&)> read;
};

Side open_side(checkpoint::Filesystem& fs, const std::string& arg, const std::string& flag) {
  Side s;
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) {  // a weights file
    const auto index = read_safetensors_index(arg);
    s.path = arg;
    s.groups.emplace_back();
    for (const auto& t : index.tensors) {
      s.groups.back().push_back(t.name);
      s.catalog.emplace(t.name, checkpoint::TensorSpec{t.name, t.shape, t.dtype});
    }
    s.read = [arg](const std::set<std::string>& names) {
      std::map<std::string, Tensor> out;
      for (auto& t : read_safetensors_subset(arg, names)) out.emplace(std::move(t.name), std::move(t.tensor));
      return out;
    };
    return s;
  }
  if (arg == "latest")
    throw InputError(flag + ": give a checkpoint folder, a checkpoint.dir, a run folder or a safetensors file, not 'latest'");
  auto point = checkpoint::resolve_resume(fs, arg, "", flag);
  auto index = std::make_shared<const checkpoint::CheckpointIndex>(checkpoint::index_checkpoint(point.path, point.manifest));
  s.path = point.path;
  s.step = point.manifest.step;
  for (const auto& shard : point.manifest.shards) s.groups.push_back(shard.tensors);
  s.catalog = index->tensors;
  s.read = [path = point.path, manifest = point.manifest, index](const std::set<std::string>& names) {
    return checkpoint::load_tensors(path, manifest, *index, names);
  };
  return s;
}

double element(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.f32()[i];
    case DType::bf16: return bf16_bits_to_float(static_cast<const std::uint16_t*>(t.raw())[i]);
    case DType::i32: return t.i32()[i];
  }
  return 0.0;
}

// Bit for bit, element by element (a NaN equals the same NaN; 0 and -0 differ).
TensorDifference compare_values(const std::string& name, const Tensor& x, const Tensor& y) {
  TensorDifference d{name, "values", "", 0, x.numel()};
  const std::size_t size = dtype_size(x.dtype());
  const auto* a = static_cast<const unsigned char*>(x.raw());
  const auto* b = static_cast<const unsigned char*>(y.raw());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if (std::memcmp(a + i * size, b + i * size, size) == 0) continue;
    ++d.elements;
    const double gap = std::fabs(element(x, i) - element(y, i));
    if (std::isnan(gap) || std::isnan(d.max_abs)) d.max_abs = std::nan("");
    else d.max_abs = std::max(d.max_abs, gap);
  }
  return d;
}

}  // namespace

CheckpointDiff diff_checkpoints(checkpoint::Filesystem& fs, const std::string& a, const std::string& b) {
  Side A = open_side(fs, a, "checkpoint diff A");
  Side B = open_side(fs, b, "checkpoint diff B");
  CheckpointDiff out;
  // A weights file holds no optimizer state: against one, only the weights are compared.
  out.weights_only = A.step < 0 || B.step < 0;
  if (out.weights_only)
    for (Side* side : {&A, &B}) {
      std::erase_if(side->catalog, [](const auto& kv) { return is_state_name(kv.first); });
      for (auto& group : side->groups) std::erase_if(group, [](const std::string& n) { return is_state_name(n); });
    }
  out.a = A.path;
  out.b = B.path;
  out.step_a = A.step;
  out.step_b = B.step;
  std::set<std::string> all;
  for (const auto& [name, spec] : A.catalog) all.insert(name);
  for (const auto& [name, spec] : B.catalog) all.insert(name);
  out.tensors = all.size();

  // One group of A at a time, with its counterparts in B: the memory of one shard each.
  for (const auto& group : A.groups) {
    std::set<std::string> both;
    for (const auto& name : group) {
      const auto other = B.catalog.find(name);
      if (other == B.catalog.end()) continue;
      const auto& mine = A.catalog.at(name);
      if (mine.dtype == other->second.dtype && mine.shape == other->second.shape) both.insert(name);
    }
    const auto xs = A.read(both);
    const auto ys = B.read(both);
    for (const auto& name : group) {
      const auto other = B.catalog.find(name);
      const auto& mine = A.catalog.at(name);
      if (other == B.catalog.end()) {
        out.differences.push_back({name, "only in A"});
      } else if (mine.dtype != other->second.dtype) {
        out.differences.push_back({name, "dtype", fmt::format("{} in A, {} in B", dtype_name(mine.dtype),
                                                              dtype_name(other->second.dtype))});
      } else if (mine.shape != other->second.shape) {
        out.differences.push_back(
            {name, "shape", fmt::format("{} in A, {} in B", mine.shape.str(), other->second.shape.str())});
      } else if (auto d = compare_values(name, xs.at(name), ys.at(name)); d.elements > 0) {
        out.differences.push_back(std::move(d));
      }
    }
  }
  for (const auto& group : B.groups)
    for (const auto& name : group)
      if (!A.catalog.count(name)) out.differences.push_back({name, "only in B"});
  return out;
}

nlohmann::json diff_json(const CheckpointDiff& diff) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& d : diff.differences) {
    nlohmann::json j = {{"name", d.name}, {"kind", d.kind}};
    if (!d.detail.empty()) j["detail"] = d.detail;
    if (d.kind == "values") {
      j["elements"] = d.elements;
      j["of"] = d.of;
      j["max_abs"] = std::isnan(d.max_abs) ? nlohmann::json(nullptr) : nlohmann::json(d.max_abs);
    }
    list.push_back(std::move(j));
  }
  const auto step = [](std::int64_t s) { return s < 0 ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"a", diff.a},           {"b", diff.b},
          {"step_a", step(diff.step_a)}, {"step_b", step(diff.step_b)},
          {"tensors", diff.tensors}, {"weights_only", diff.weights_only}, {"identical", diff.identical()},
          {"differences", list}};
}

std::string diff_text(const CheckpointDiff& diff) {
  const auto side = [](const std::string& path, std::int64_t step) {
    return step < 0 ? fmt::format("{} (a weights file)", path) : fmt::format("{} (step {})", path, step);
  };
  std::string out = fmt::format("A: {}\nB: {}\n", side(diff.a, diff.step_a), side(diff.b, diff.step_b));
  if (diff.weights_only) out += "weights only (a weights file holds no optimizer state)\n";
  for (const auto& d : diff.differences) {
    if (d.kind == "values")
      out += fmt::format("{}: {} of {} elements differ, max |a - b| {:.3g}\n", d.name, d.elements, d.of, d.max_abs);
    else
      out += fmt::format("{}: {}{}\n", d.name, d.kind, d.detail.empty() ? "" : " " + d.detail);
  }
  if (diff.identical())
    out += fmt::format("identical: all {} tensors bitwise equal\n", diff.tensors);
  else
    out += fmt::format("differ: {} of {} tensors (the first: {})\n", diff.differences.size(), diff.tensors,
                       diff.differences.front().name);
  return out;
}

}  // namespace conveyor
