#include "apps/train/node_identity.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>

#include "actors/plan/protocol.hpp"
#include "apps/config/config_loader.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

std::string fnv1a_hex(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

// "model.layers" → "4", "devices.ids" → "[0, 1]": every leaf of the YAML, in flow style.
void flatten(const YAML::Node& node, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node)
      flatten(kv.second, prefix.empty() ? kv.first.as<std::string>()
                                        : prefix + "." + kv.first.as<std::string>(),
              out);
    return;
  }
  YAML::Emitter e;
  e.SetSeqFormat(YAML::Flow);
  e << node;
  out[prefix] = e.c_str();
}

std::map<std::string, std::string> flat(const std::string& yaml) {
  std::map<std::string, std::string> out;
  try {
    flatten(YAML::Load(yaml), "", out);
  } catch (const YAML::Exception&) {
    out["<config>"] = "(unreadable)";
  }
  return out;
}

}  // namespace

std::string NodeIdentity::to_json() const {
  return nlohmann::json{{"conveyor", conveyor_version},
                        {"protocol", protocol_version},
                        {"config_hash", config_hash},
                        {"config", config_yaml},
                        {"resume_step", resume_step}}
      .dump();
}

NodeIdentity NodeIdentity::from_json(const std::string& text, int node) {
  try {
    const auto j = nlohmann::json::parse(text);
    NodeIdentity id;
    id.conveyor_version = j.at("conveyor").get<std::string>();
    id.protocol_version = j.at("protocol").get<int>();
    id.config_hash = j.at("config_hash").get<std::string>();
    id.config_yaml = j.at("config").get<std::string>();
    id.resume_step = j.at("resume_step").get<std::int64_t>();
    return id;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("rendezvous: node {}'s identity (key 'identity/{}') is not readable "
                                 "(another program, or a conveyor of another version?): {}",
                                 node, node, e.what()));
  }
}

NodeIdentity identity_of(const RunConfig& config, std::int64_t resume_step) {
  NodeIdentity id;
  id.resume_step = resume_step;
  id.conveyor_version = CONVEYOR_VERSION;
  id.protocol_version = kProtocolVersion;
  id.config_yaml = to_yaml(config);
  id.config_hash = fnv1a_hex(id.config_yaml);
  return id;
}

std::optional<std::string> identity_mismatch(int node, const NodeIdentity& theirs,
                                             const NodeIdentity& node0) {
  if (theirs.conveyor_version != node0.conveyor_version ||
      theirs.protocol_version != node0.protocol_version)
    return fmt::format(
        "node {} runs conveyor {} (protocol {}), node 0 runs conveyor {} (protocol {}): start "
        "every node with the same build",
        node, theirs.conveyor_version, theirs.protocol_version, node0.conveyor_version,
        node0.protocol_version);
  auto resuming = [](std::int64_t step) {
    return step < 0 ? std::string("starts from scratch") : fmt::format("resumes after step {}", step);
  };
  if (theirs.resume_step != node0.resume_step)
    return fmt::format("node {} {}, node 0 {}: give every node the same --resume", node,
                       resuming(theirs.resume_step), resuming(node0.resume_step));
  if (theirs.config_hash == node0.config_hash && theirs.config_yaml == node0.config_yaml)
    return std::nullopt;
  const auto a = flat(theirs.config_yaml), b = flat(node0.config_yaml);
  std::string keys;
  auto add = [&](const std::string& key, const std::string& va, const std::string& vb) {
    keys += fmt::format("{}{} is {} on node {}, {} on node 0", keys.empty() ? "" : "; ", key, va,
                        node, vb);
  };
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end())
      add(k, v, "(absent)");
    else if (it->second != v)
      add(k, v, it->second);
  }
  for (const auto& [k, v] : b)
    if (!a.count(k)) add(k, "(absent)", v);
  if (keys.empty()) keys = "the files differ in layout only";
  return fmt::format("node {}'s config differs from node 0's (hash {} vs {}): {}", node,
                     theirs.config_hash, node0.config_hash, keys);
}

}  // namespace conveyor
