#pragma once
// Whether a job over several processes can write checkpoints, and what a stop (SIGTERM,
// a first Ctrl-C) does there. Node 0 writes every checkpoint: from its snapshot store,
// which holds a copy of every other node's in-memory snapshot of the checkpoint's step
// (actors/cluster/snapshot_keeper.hpp: sent as each snapshot is taken with
// fault.buddy_copies, else asked for at the checkpoint's step), so snapshots at that step
// are needed; or, for data-parallel replicas without sharded optimizer state (which keep
// no snapshots across processes), by asking replica 0's stages, which must then all run
// on node 0 (a stage in another process cannot hand its tensors over CAF).
#include <cstdint>
#include <optional>
#include <string>

#include "apps/config/run_config.hpp"
#include "apps/launch/launch_spec.hpp"

namespace conveyor {

/// Why this job cannot write checkpoints across processes, naming the keys to change;
/// nullopt when it can, or when it runs in one process. `with_every`: the config's
/// checkpoint.every > 0 must also fall on snapshot steps.
std::optional<std::string> cross_process_checkpoint_refusal(const RunConfig& config,
                                                            const LaunchSpec& spec,
                                                            bool with_every);

/// Refuses (InputError) checkpoint.every > 0 in a job over several processes that cannot
/// write them, before anything starts.
void check_checkpoints_across_processes(const RunConfig& config, const LaunchSpec& spec);

/// What a stop does in this job. One process: a checkpoint at the next step boundary.
/// Several: the same when they can checkpoint, at the next boundary that every node has
/// snapshotted (a multiple of fault.snapshot_every: node 0 has no other copy of another
/// node's state); else the job ends at the next boundary without one (`refusal` says why).
struct StopPlan {
  bool checkpoints = true;
  std::int64_t every_steps = 1;       // the boundaries a stop may end the run at
  std::optional<std::string> refusal; // set when !checkpoints
};
StopPlan stop_plan(const RunConfig& config, const LaunchSpec& spec);

}  // namespace conveyor
