#pragma once
// Where the stages of a recovery take their state from (fault.policy restart, fault.on_nan
// rollback): from a healthy data-parallel replica, or from the in-memory snapshots.
//
// With replicas (parallel.data: R > 1) every replica of a pipeline stage holds the same
// weights, AdamW moments and step count at every step boundary. While no stage has taken
// the optimizer step of the step under way (`boundary`: the completed steps every stage
// that is still alive holds), a respawned stage can copy the state of a replica of its
// pipeline stage that was not respawned, and every other stage keeps its own: nothing is
// lost, no snapshot is needed, and the steps from `boundary` are replayed. Otherwise (a
// failure inside the optimizer step, where some stages stepped and some did not; every
// replica of some stage respawned; one replica) every stage loads the newest snapshot all
// of them hold, as with one replica.
//
// What must hold: a source is never a respawned actor, and it runs the same pipeline stage
// as the actor it restores (same chunks, same parameter names). With one replica the
// choice is always the snapshot: the path the run took before replicas existed.
// Pure logic: no CAF.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/replica_placement.hpp"

namespace conveyor {

struct RestoreSource {
  enum class Kind {
    replicas,  // respawned actors copy a healthy replica; the others keep their state
    snapshot,  // every actor loads its snapshot of `steps_done`
  };
  Kind kind = Kind::snapshot;
  /// Completed train steps every stage holds once restored; the replay starts there.
  std::int64_t steps_done = 0;
  /// Kind::replicas: respawned actor → the healthy actor whose state it copies.
  std::map<int, int> sources;

  /// For the recovery row (`restored_from`): "snapshot", "replica 0" (every source of
  /// that replica), "replicas 0, 2", or "kept" (replicas, nothing respawned: a NaN
  /// rollback or a broken stage group; every stage kept its state).
  std::string describe(const ReplicaLayout& layout) const;
};

/// The state a recovery restores. `respawned`: actors replaced (dead, hung); `boundary`:
/// the completed steps every surviving actor holds, nullopt once some stage may have taken
/// the step's optimizer step; `snapshot`: the newest step every actor holds a snapshot of
/// (SnapshotStore::consistent_step), nullopt without snapshots. Nullopt: nothing to
/// restore from (the run cannot recover).
/// `sharded_state` (optim.shard_state): each replica holds only its part of the AdamW
/// moments, so a respawned actor cannot copy a twin: only the snapshot restores it (a
/// recovery that respawns nothing still keeps every stage's state).
/// REQUIRES: every respawned actor is in [0, layout.actors()).
std::optional<RestoreSource> choose_restore_source(const ReplicaLayout& layout,
                                                   const std::vector<int>& respawned,
                                                   std::optional<std::int64_t> boundary,
                                                   std::optional<std::int64_t> snapshot,
                                                   bool sharded_state = false);

}  // namespace conveyor
