#pragma once
// Whether a job over several processes takes a replacement for a lost node other than 0:
// the replacement rejoins the running job and its stages restore node 0's copies of their
// snapshots, so node 0 must keep them (fault.buddy_copies on, or auto with CPU stages),
// or, without them, every stage goes back to the newest checkpoint (CPU stages,
// checkpoint.every > 0; with optim.shard_state each replica cuts its part of the merged
// AdamW state); node 0 must wait for it
// (fault.policy restart, fault.rejoin_timeout_s > 0), and snapshots must be taken
// (fault.snapshot_every > 0). Must agree with the composition root's `rejoin`
// (actors/runtime/run_job.cpp), which decides on the resolved job.
#include "apps/config/run_config.hpp"

namespace conveyor {

bool takes_replacements(const RunConfig& config);

}  // namespace conveyor
