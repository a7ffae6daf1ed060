#pragma once
// In-memory snapshots of every stage's training state at step boundaries: what a stage
// restart (or a NaN rollback) restores, so recovery needs no disk and loses at most
// fault.snapshot_every steps.
//
// Each stage actor puts its own snapshot after the optimizer step that completes a due
// step (from its own thread, in parallel); the store lives in the process, outside every
// actor, so a stage that dies does not take its snapshot with it. The coordinator restores
// all stages to the newest step that every stage holds (consistent_step()): a stage that
// failed during the optimizer step may be one snapshot behind its peers, hence two kept
// per stage.
//
// Thread-safety: every member locks; snapshots are immutable once put (shared handles).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/checkpoint/snapshot.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/model/state_snapshot.hpp"

namespace conveyor {

/// One stage's state after `steps_done` steps: each of its chunks' model snapshot.
struct StageStateSnapshot {
  std::int64_t steps_done = 0;  // completed train steps it reflects
  std::vector<std::shared_ptr<const StateSnapshot>> chunks;  // by chunk (StageWorker order)
  bool marker = false;          // held in the stage's own process only (put_marker)

  /// AdamW's step count then (skipped steps excluded); chunks step together.
  std::int64_t optimizer_steps() const { return chunks.empty() ? 0 : chunks.front()->optimizer_steps(); }
  /// Every chunk's named tensors (StageModel::capture_state()), concatenated.
  std::vector<NamedTensor> tensors() const;
  std::size_t bytes() const;
};

class SnapshotStore {
 public:
  /// `ranks` stages; `keep` newest snapshots kept per stage (at least 2, see above).
  explicit SnapshotStore(int ranks, int keep = 2);

  int ranks() const;
  /// Stores `snapshot` for `rank`, replacing one of the same step; drops the oldest beyond
  /// `keep`. Throws std::out_of_range for a bad rank.
  void put(int rank, StageStateSnapshot snapshot);
  /// Notes that `rank` holds its snapshot of `steps_done` in its own process (a GPU stage
  /// of another node: node 0 keeps no copy): it counts for consistent_step(), it cannot be
  /// restored from here (get() returns it with no chunks), and no checkpoint is made of it.
  /// A copy of that step held already stays (a put() of the copy replaces the marker).
  void put_marker(int rank, std::int64_t steps_done);
  /// The newest steps_done that every stage holds; nullopt when some stage has none.
  std::optional<std::int64_t> consistent_step() const;
  /// The newest steps_done that every rank of `ranks` holds (the standby's copies of the
  /// leader's stages, issue 44); nullopt when one holds none, or `ranks` is empty or names
  /// a rank this store does not have.
  std::optional<std::int64_t> consistent_step(const std::vector<int>& ranks) const;
  /// `rank`'s snapshot of `steps_done`; null when it has none.
  std::shared_ptr<const StageStateSnapshot> get(int rank, std::int64_t steps_done) const;
  /// Every stage's snapshot of `steps_done` as checkpoint shards (rank order), with the
  /// optimizer step count; nullopt unless every stage holds it here (markers do not). The shards hold producers
  /// (StageShard::produce): a GPU snapshot is converted to named tensors (after its copy
  /// finished) where the checkpoint is written, on the writer's thread, not here.
  std::optional<std::pair<std::vector<checkpoint::StageShard>, std::int64_t>> shards(
      std::int64_t steps_done) const;
  /// Forgets snapshots newer than `steps_done` (they belong to steps being replayed).
  void discard_after(std::int64_t steps_done);
  /// Host bytes held by every snapshot.
  std::size_t bytes() const;
  /// The job moved onto a layout of `ranks` stage actors (issue 44's re-plan): every
  /// snapshot is forgotten (they are the old actors'; the coordinator keeps what it cut
  /// from them and puts the new actors' own). Throws std::invalid_argument when ranks < 1.
  void reset(int ranks);

 private:
  using PerRank = std::map<std::int64_t, std::shared_ptr<const StageStateSnapshot>>;
  int ranks_;  // under mutex_: reset() changes it
  std::size_t keep_;
  mutable std::mutex mutex_;
  std::vector<PerRank> by_rank_;
};

}  // namespace conveyor
