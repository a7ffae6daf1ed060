#include "actors/fault/restore_source.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace conveyor {

std::string RestoreSource::describe(const ReplicaLayout& layout) const {
  if (kind == Kind::snapshot) return "snapshot";
  if (sources.empty()) return "kept";
  std::set<int> replicas;
  for (const auto& [to, from] : sources) replicas.insert(layout.replica_of(from));
  return fmt::format("{} {}", replicas.size() == 1 ? "replica" : "replicas",
                     fmt::join(replicas, ", "));
}

std::optional<RestoreSource> choose_restore_source(const ReplicaLayout& layout,
                                                   const std::vector<int>& respawned,
                                                   std::optional<std::int64_t> boundary,
                                                   std::optional<std::int64_t> snapshot,
                                                   bool sharded_state) {
  auto dead = [&](int actor) {
    return std::find(respawned.begin(), respawned.end(), actor) != respawned.end();
  };
  if (layout.replicas > 1 && boundary && (!sharded_state || respawned.empty())) {
    RestoreSource out{RestoreSource::Kind::replicas, *boundary, {}};
    bool every_one = true;
    for (int actor : respawned) {
      // The lowest replica of the same pipeline stage that was not replaced.
      const int stage = layout.stage_of(actor);
      bool found = false;
      for (int r = 0; r < layout.replicas && !found; ++r) {
        const int peer = layout.actor(r, stage);
        if (!dead(peer)) {
          out.sources[actor] = peer;
          found = true;
        }
      }
      every_one = every_one && found;
    }
    if (every_one) return out;
  }
  if (snapshot) return RestoreSource{RestoreSource::Kind::snapshot, *snapshot, {}};
  return std::nullopt;
}

}  // namespace conveyor
