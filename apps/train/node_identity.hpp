#pragma once
// What every node of a multi-process job reports at the rendezvous before anything
// starts: its conveyor and protocol versions, its resolved config (and the config's hash)
// and the step of the checkpoint it resumes from. Nodes that disagree with node 0 would
// compute different models, speak different messages or start from different states, so
// the job stops at start with both values and the differing keys.
#include <cstdint>
#include <optional>
#include <string>

#include "apps/config/run_config.hpp"

namespace conveyor {

struct NodeIdentity {
  std::string conveyor_version;
  int protocol_version = 0;
  std::string config_yaml;  // the resolved config, as written to config.yaml
  std::string config_hash;  // FNV-1a 64 of config_yaml, 16 hex digits
  std::int64_t resume_step = -1;  // the checkpoint's step with --resume; -1 without

  /// As stored under identity/<node> (JSON) and back; from_json throws InputError naming
  /// `node` (whose identity the text is).
  std::string to_json() const;
  static NodeIdentity from_json(const std::string& text, int node);
};

/// This process's identity for `config`, resuming after `resume_step` (-1: not resuming).
NodeIdentity identity_of(const RunConfig& config, std::int64_t resume_step = -1);

/// std::nullopt when `node`'s identity agrees with node 0's; else one line naming both
/// values: "node 1's config differs from node 0's (hash 1f.. vs 9c..): train.steps is 5
/// on node 1, 6 on node 0", or the differing versions.
std::optional<std::string> identity_mismatch(int node, const NodeIdentity& theirs,
                                             const NodeIdentity& node0);

}  // namespace conveyor
