#include "actors/checkpoint/manifest.hpp"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "actors/checkpoint/checkpoint_error.hpp"

namespace conveyor::checkpoint {
namespace {

using nlohmann::json;

class FieldReader {
 public:
  explicit FieldReader(const std::string& path) : path_(path) {}

  [[noreturn]] void bad(const std::string& field, const std::string& what) const {
    throw CheckpointError(path_, "invalid manifest: field \"" + field + "\" " + what);
  }

  const json& get(const json& obj, const std::string& key, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end()) bad(field, "is missing");
    return *it;
  }

  std::uint64_t unsigned_int(const json& v, const std::string& field, std::uint64_t max) const {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > max)
      bad(field, "must be an integer in [0, " + std::to_string(max) + "], got " + v.dump());
    return v.get<std::uint64_t>();
  }

  // A number of blocks that is a multiple of 0.5, as half blocks.
  std::int64_t halves(const json& v, const std::string& field) const {
    const double h = v.is_number() ? 2.0 * v.get<double>() : -1.0;
    if (!(h >= 0.0 && h <= 1e15 && h == std::floor(h)))
      bad(field, "must be a number of blocks >= 0, a multiple of 0.5, got " + v.dump());
    return static_cast<std::int64_t>(h);
  }

  std::string string(const json& v, const std::string& field) const {
    if (!v.is_string()) bad(field, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }

  const json& array(const json& v, const std::string& field) const {
    if (!v.is_array()) bad(field, "must be a list, got " + v.dump());
    return v;
  }

 private:
  const std::string& path_;
};

constexpr std::uint64_t kMaxI64 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::uint64_t kMaxInt = static_cast<std::uint64_t>(std::numeric_limits<int>::max());

// A shard must sit in the checkpoint folder itself: no separators, no "..", no hidden or
// temporary names (those are what an unfinished write leaves behind).
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name.front() != '.';
}

bool lowercase_hex_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

ShardEntry parse_shard(const json& v, const std::string& field, const FieldReader& r) {
  if (!v.is_object()) r.bad(field, "must be an object, got " + v.dump());
  ShardEntry s;
  s.file = r.string(r.get(v, "file", field + ".file"), field + ".file");
  if (!plain_file_name(s.file))
    r.bad(field + ".file", "must be a plain file name inside the checkpoint folder, got \"" + s.file + "\"");
  s.stage = static_cast<int>(r.unsigned_int(r.get(v, "stage", field + ".stage"), field + ".stage", kMaxInt));
  s.bytes = r.unsigned_int(r.get(v, "bytes", field + ".bytes"), field + ".bytes", kMaxI64);
  s.sha256 = r.string(r.get(v, "sha256", field + ".sha256"), field + ".sha256");
  if (!lowercase_hex_sha256(s.sha256))
    r.bad(field + ".sha256", "must be 64 lowercase hex digits, got \"" + s.sha256 + "\"");
  const json& tensors = r.array(r.get(v, "tensors", field + ".tensors"), field + ".tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    s.tensors.push_back(r.string(tensors[i], field + ".tensors[" + std::to_string(i) + "]"));
  return s;
}

}  // namespace

std::string encode_manifest(const Manifest& m) {
  nlohmann::ordered_json j;
  j["format_version"] = m.format_version;
  j["step"] = m.step;
  j["optimizer_steps"] = m.optimizer_steps;
  j["seed"] = m.seed;
  j["schedule"] = m.schedule;
  j["stages"] = m.stages;
  j["partition"] = nlohmann::ordered_json::array();
  for (std::int64_t h : m.partition_halves) {
    if (h % 2 == 0)
      j["partition"].push_back(h / 2);
    else
      j["partition"].push_back(static_cast<double>(h) / 2.0);
  }
  j["config"] = m.config;
  j["rng"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.rng) j["rng"][k] = v;
  j["shards"] = nlohmann::ordered_json::array();
  for (const auto& s : m.shards)
    j["shards"].push_back({{"file", s.file},
                           {"stage", s.stage},
                           {"bytes", s.bytes},
                           {"sha256", s.sha256},
                           {"tensors", s.tensors}});
  return j.dump(2) + "\n";
}

Manifest parse_manifest(std::string_view text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw CheckpointError(path, std::string("invalid manifest: not valid JSON: ") + e.what());
  }
  FieldReader r(path);
  if (!j.is_object()) throw CheckpointError(path, "invalid manifest: not a JSON object");

  Manifest m;
  const auto version = r.unsigned_int(r.get(j, "format_version", "format_version"), "format_version", kMaxInt);
  if (version != static_cast<std::uint64_t>(kManifestVersion))
    r.bad("format_version", "is " + std::to_string(version) + "; this build reads version " +
                                std::to_string(kManifestVersion));
  m.format_version = static_cast<int>(version);
  m.step = static_cast<std::int64_t>(r.unsigned_int(r.get(j, "step", "step"), "step", kMaxI64));
  m.optimizer_steps = static_cast<std::int64_t>(
      r.unsigned_int(r.get(j, "optimizer_steps", "optimizer_steps"), "optimizer_steps", kMaxI64));
  if (m.optimizer_steps > m.step)  // AdamW steps at most once per train step (fewer if skipped)
    r.bad("optimizer_steps", "is " + std::to_string(m.optimizer_steps) + ", more than \"step\" (" +
                                 std::to_string(m.step) + ")");
  m.seed = r.unsigned_int(r.get(j, "seed", "seed"), "seed", std::numeric_limits<std::uint64_t>::max());
  m.schedule = r.string(r.get(j, "schedule", "schedule"), "schedule");
  m.stages = static_cast<int>(r.unsigned_int(r.get(j, "stages", "stages"), "stages", kMaxInt));
  if (m.stages < 1) r.bad("stages", "must be at least 1, got 0");
  const json& partition = r.array(r.get(j, "partition", "partition"), "partition");
  for (std::size_t i = 0; i < partition.size(); ++i) {
    const std::string field = "partition[" + std::to_string(i) + "]";
    m.partition_halves.push_back(r.halves(partition[i], field));
    if (m.partition_halves.back() == 0) r.bad(field, "is 0: every model stage holds at least half a block");
  }
  // One entry per stage, or per chunk with several chunks per stage (chunk order).
  if (partition.empty() || partition.size() % static_cast<std::size_t>(m.stages) != 0)
    r.bad("partition", "has " + std::to_string(partition.size()) + " entries, not a multiple of \"stages\" (" +
                           std::to_string(m.stages) + ")");
  m.config = r.string(r.get(j, "config", "config"), "config");
  if (auto it = j.find("rng"); it != j.end()) {
    if (!it->is_object()) r.bad("rng", "must be an object, got " + it->dump());
    for (const auto& [k, v] : it->items()) m.rng[k] = r.string(v, "rng." + k);
  }

  const json& shards = r.array(r.get(j, "shards", "shards"), "shards");
  if (shards.empty()) r.bad("shards", "is empty: a checkpoint holds at least one shard");
  std::set<std::string> files, tensors;
  std::set<int> stages;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string field = "shards[" + std::to_string(i) + "]";
    ShardEntry s = parse_shard(shards[i], field, r);
    if (!files.insert(s.file).second) r.bad(field + ".file", "names \"" + s.file + "\" twice");
    if (s.stage >= m.stages)
      r.bad(field + ".stage", "is " + std::to_string(s.stage) + ", not below \"stages\" (" + std::to_string(m.stages) + ")");
    if (!stages.insert(s.stage).second) r.bad(field + ".stage", "repeats stage " + std::to_string(s.stage));
    for (const auto& t : s.tensors)
      if (!tensors.insert(t).second) r.bad(field + ".tensors", "names tensor \"" + t + "\" in two places");
    m.shards.push_back(std::move(s));
  }
  return m;
}

}  // namespace conveyor::checkpoint
