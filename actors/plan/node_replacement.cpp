#include "actors/plan/node_replacement.hpp"

namespace conveyor {

std::string no_replacement_reason(const ReplacementFacts& f) {
  if (f.nodes <= 1) return "it runs in one process";
  if (f.policy != FaultPolicy::restart) return "fault.policy is abort";
  if (!f.snapshots) return "fault.snapshot_every is 0: no snapshots to restore";
  if (!f.copies && !f.all_cpu)
    return "node 0 keeps no copy of GPU stages' snapshots (fault.buddy_copies), and a "
           "replacement process does not join the NCCL edges yet";
  if (!f.copies && f.checkpoint_every <= 0)
    return "node 0 keeps no copy of the other nodes' snapshots (fault.buddy_copies is off) "
           "and no checkpoint is written to go back to (checkpoint.every is 0)";
  if (f.rejoin_timeout_s <= 0) return "fault.rejoin_timeout_s is 0";
  return "";
}

}  // namespace conveyor
