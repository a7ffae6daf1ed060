#pragma once
// What the coordinator asks at every step boundary about checkpoints, and where it hands
// the stages' state. The app implements it (apps/train/train_checkpoints.hpp) over the
// checkpoint library; the coordinator only takes the in-memory snapshot: at a boundary
// every stage has finished its optimizer step and no plan runs, so the state it captures
// is exactly "after `steps_done` steps" on every stage.
//
// The hook reaches the coordinator through Job::checkpoints. All calls come from
// the coordinator's thread, in step order.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/checkpoint/snapshot.hpp"
#include "actors/checkpoint/staged_shards.hpp"
#include "actors/plan/job_plan.hpp"

namespace conveyor {

/// A complete, verified checkpoint a recovery can go back to (CheckpointHook::
/// newest_checkpoint), or why there is none.
struct CheckpointRestorePoint {
  std::string path;  // the step folder
  std::int64_t step = 0;
  std::string error;  // empty when found
};

/// Which checkpoints CheckpointHook::newest_checkpoint may return: only those of the
/// layout the job runs now (a rejoined node's stages load their own rank's shard), or
/// those of any layout this job ran on (a shrink cuts the checkpoint for its new layout by
/// tensor name, whatever layout wrote it: issue 44).
enum class CheckpointLayouts { current, any_of_the_run };

struct BoundaryDecision {
  bool snapshot = false;  // capture every stage's state and hand it to take()
  bool stop = false;      // then end the run here (a preemption notice); without snapshot
                          // the run ends with no state captured (it cannot checkpoint)
};

class CheckpointHook {
 public:
  virtual ~CheckpointHook() = default;
  /// Completed steps the run starts from: the resumed checkpoint's step, else 0.
  virtual std::int64_t first_step() const = 0;
  /// After the optimizer step that completes `steps_done` steps, before any evaluation.
  virtual BoundaryDecision at_boundary(std::int64_t steps_done) = 0;
  /// Polled while the evaluation after the boundary of `steps_done` steps runs: true when
  /// the run must stop (a preemption notice that came after at_boundary). The coordinator
  /// then drops the evaluation and stops at that boundary: take() with `stop` follows,
  /// unless `steps_done` is the last step (the run then writes its weights instead).
  virtual bool stop_during_eval(std::int64_t steps_done) = 0;
  /// Every stage's state after `steps_done` steps, one shard per rank in rank order, and
  /// AdamW's step count then (fewer than steps_done after skipped steps). With `stop` it
  /// must not return before the checkpoint is durable; it may follow a take() of the same
  /// `steps_done` without `stop` (a stop during the evaluation after a checkpointed
  /// boundary), which it must then make durable (the repeat's `shards` may then be empty:
  /// the first take's are the ones written). Throwing fails the run.
  virtual void take(std::int64_t steps_done, std::vector<checkpoint::StageShard> shards,
                    std::int64_t optimizer_steps, bool stop) = 0;
  /// The job moved onto another layout (issue 44's shrink or grow): every take() from now
  /// on hands over `plan`'s stages, one shard per rank of one replica, and the checkpoint
  /// must say that layout (its stages and partition), not the one the job started with, or
  /// --resume's partition check refuses it. Called before the first take() of the new
  /// layout; takes already handed over keep the layout they were taken in. The default (a
  /// hook whose job never changes layout) ignores it.
  virtual void on_relayout(const JobPlan& /*plan*/) {}
  /// checkpoint.writers every_node, across processes: before the take() of `steps_done`,
  /// prepares the folder where the other processes write their own stages' shards of that
  /// step (actors/checkpoint/staged_shards.hpp) and names the attempt. Never throws: a
  /// folder it cannot prepare comes back as `error`, and that checkpoint fails as a write.
  /// The default (a hook of runs in one process) refuses.
  virtual checkpoint::StagingTarget stage_remote_shards(std::int64_t /*steps_done*/) {
    return {"", "", "this run's checkpoints take no shards written by other processes"};
  }
  /// The newest complete checkpoint of this run's checkpoint folder with at most
  /// `steps_done` steps, of a layout `layouts` allows, verified (manifest, sizes, sha256),
  /// once the writes under way have ended: where a lost node's replacement, or a shrink,
  /// goes back to when node 0 keeps no copy of the other nodes' snapshots. Never throws.
  /// The default (no checkpoints) has none.
  virtual CheckpointRestorePoint newest_checkpoint(std::int64_t /*steps_done*/, CheckpointLayouts /*layouts*/) {
    return {"", 0, "this run writes no checkpoints"};
  }
};

}  // namespace conveyor
