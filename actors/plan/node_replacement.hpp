#pragma once
// Whether a job over several processes takes a replacement for a lost node k > 0: the
// one rule, asked by the launch before the job exists (apps/train/node_replacement.hpp,
// from the config) and by the composition root on the resolved job
// (actors/runtime/job_setup.cpp). A replacement rejoins the running job and its stages
// restore node 0's copies of their snapshots, so node 0 must keep them (buddy copies), or,
// without them, every stage goes back to the newest checkpoint (host-memory stages,
// checkpoint.every > 0); node 0 must wait for it (fault.policy restart,
// fault.rejoin_timeout_s > 0), and snapshots must be taken (fault.snapshot_every > 0).
#include <cstdint>
#include <string>

#include "actors/plan/recovery_policy.hpp"

namespace conveyor {

/// What the rule reads.
struct ReplacementFacts {
  int nodes = 1;                      // processes of the job
  FaultPolicy policy = FaultPolicy::abort;
  bool snapshots = false;             // the stages keep in-memory snapshots
  bool copies = false;                // node 0 keeps copies of the other nodes' snapshots
  bool all_cpu = true;                // every stage computes in host memory
  std::int64_t checkpoint_every = 0;  // checkpoint.every
  double rejoin_timeout_s = 0;        // fault.rejoin_timeout_s
};

/// Why a lost node k > 0 cannot be replaced, in words naming the keys; empty when it can.
std::string no_replacement_reason(const ReplacementFacts& facts);

/// fault.buddy_copies with `automatic` resolved: on when every stage computes in host
/// memory. (On with GPU stages is refused where the job is set up.)
inline bool buddy_copies_on(BuddyCopies setting, bool all_cpu) {
  return setting == BuddyCopies::on || (setting == BuddyCopies::automatic && all_cpu);
}

}  // namespace conveyor
