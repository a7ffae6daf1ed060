#include "apps/train/node_replacement.hpp"

namespace conveyor {

bool takes_replacements(const RunConfig& config) {
  const auto& f = config.fault;
  const bool copies = f.buddy_copies == "on" || (f.buddy_copies == "auto" && config.devices.kind == "cpu");
  return copies && f.policy == "restart" && f.snapshot_every > 0 && f.rejoin_timeout_s > 0;
}

}  // namespace conveyor
