#pragma once
// `conveyor train`'s side of checkpoints: the policy (when to take one), the manifest
// (what the run is), and the writer. It is the run's TrainingObserver (forwarding steps
// and evaluations to the metrics log) and the coordinator's CheckpointHook:
// - every `checkpoint.every` steps the coordinator hands over host copies of every stage's
//   state and training goes on while a BackgroundWriter writes them;
// - after SIGTERM (preemption.hpp) the next boundary takes one, writes it synchronously,
//   and the run stops there (stopped_at()); during an evaluation, the boundary before it
//   (the evaluation is dropped; a resumed run runs it first).
// Thread-safety: the hook calls come from the coordinator's thread; the rest from the
// thread that built it, after the run returned.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/checkpoint/background_writer.hpp"
#include "actors/checkpoint/corrupting_filesystem.hpp"
#include "actors/checkpoint/stalling_filesystem.hpp"
#include "actors/job/checkpoint_hook.hpp"
#include "actors/plan/job_plan.hpp"
#include "actors/plan/training_observer.hpp"

namespace conveyor {

struct CheckpointSettings {
  std::string dir;              // checkpoint.dir, resolved (DIR/checkpoints by default)
  std::int64_t every = 0;       // checkpoint.every (0: only on SIGTERM)
  int keep = 3;                 // checkpoint.keep
  std::int64_t total_steps = 1; // train.steps
  std::int64_t first_step = 0;  // the resumed checkpoint's step
  // The resumed checkpoint's layout (stages, partition in half blocks), which may differ
  // from the one this job starts on (--resume reshards): a shrink may go back to it.
  std::optional<std::pair<int, std::vector<std::int64_t>>> resumed_layout;
  checkpoint::Manifest base;    // step, optimizer_steps and shards are filled per checkpoint
  std::set<std::int64_t> corrupt_steps;  // fault.inject corrupt-checkpoint:step=N
  std::map<std::int64_t, std::chrono::milliseconds> stalled_steps;  // fault.inject slow-checkpoint:step=N:ms=D
  // A stop ends the run at a boundary that is a multiple of this (StopPlan::every_steps);
  // false `writes`: a job that cannot checkpoint (StopPlan::refusal): a stop ends it
  // at the next boundary without one, and nothing is written.
  std::int64_t stop_every = 1;
  bool writes = true;
};

/// The decision at the boundary after `steps_done` steps. The last step never stops
/// (the run is ending: it writes its weights instead); a stop comes at a multiple of
/// `stop_every` only, and snapshots unless the run cannot write (`writes` false).
BoundaryDecision checkpoint_decision(std::int64_t steps_done, std::int64_t every,
                                     std::int64_t total_steps, bool stop_requested,
                                     std::int64_t stop_every = 1, bool writes = true);

/// The manifest fields a run knows before it starts: seed, schedule, stages, partition
/// (blocks per model stage) and the resolved config text.
checkpoint::Manifest manifest_base(const JobPlan& plan, const std::string& schedule,
                                   const std::string& config_text);

/// The layout fields of `m` as `plan` runs: stages (one replica's ranks), partition (half
/// blocks per model stage) and, when the plan's schedule is a named one, its name (the
/// partition check reads zbv's chunks by it). At the start and after every re-layout
/// (issue 44), so that a checkpoint says the layout of the shards it holds.
void set_manifest_layout(checkpoint::Manifest& m, const JobPlan& plan);

/// Creates an explicitly configured checkpoint.dir before the run starts, so that a folder
/// that cannot exist fails now (InputError naming checkpoint.dir and the reason) rather
/// than at the first checkpoint.
void prepare_checkpoint_dir(const std::string& dir);

/// The run folder's own checkpoints/ (checkpoint.dir not set), made at start so that it
/// can be locked before another run names it as its checkpoint.dir, and removed at the
/// end if no checkpoint was written into it.
class DefaultCheckpointFolder {
 public:
  explicit DefaultCheckpointFolder(std::string dir) : dir_(std::move(dir)) { prepare_checkpoint_dir(dir_); }
  ~DefaultCheckpointFolder();
  DefaultCheckpointFolder(const DefaultCheckpointFolder&) = delete;
  DefaultCheckpointFolder& operator=(const DefaultCheckpointFolder&) = delete;

 private:
  std::string dir_;
};

class TrainCheckpoints final : public TrainingObserver, public CheckpointHook {
 public:
  /// `metrics` must outlive this object; `stop_requested` is polled at every boundary.
  TrainCheckpoints(TrainingObserver& metrics, CheckpointSettings settings,
                   std::function<bool()> stop_requested);

  void on_step(const StepMetrics& m, const std::vector<StageReport>& reports) override {
    metrics_.on_step(m, reports);
  }
  void on_eval(const EvalMetrics& m) override { metrics_.on_eval(m); }
  void on_recovery(const RecoveryEvent& e) override { metrics_.on_recovery(e); }
  void on_node_lost(int node, const std::string& why, double wait_s) override {
    metrics_.on_node_lost(node, why, wait_s);
  }
  void on_replan(const ReplanEvent& e, const JobPlan& plan, const std::vector<int>& node_of_rank,
                 int generation) override {
    metrics_.on_replan(e, plan, node_of_rank, generation);
  }

  /// The checkpoints taken from now on hold `plan`'s shards (set_manifest_layout).
  void on_relayout(const JobPlan& plan) override;
  std::int64_t first_step() const override { return settings_.first_step; }
  BoundaryDecision at_boundary(std::int64_t steps_done) override;
  bool stop_during_eval(std::int64_t steps_done) override;
  void take(std::int64_t steps_done, std::vector<checkpoint::StageShard> shards,
            std::int64_t optimizer_steps, bool stop) override;
  checkpoint::StagingTarget stage_remote_shards(std::int64_t steps_done) override;
  CheckpointRestorePoint newest_checkpoint(std::int64_t steps_done, CheckpointLayouts layouts) override;

  /// Waits for the background writes; throws CheckpointError naming every write of the
  /// run that failed (the run went on after each: its later checkpoints and final weights
  /// are written all the same). A checkpoint lost with a node (a shard its process was
  /// writing) is not among them: it is in lost_with_nodes().
  void flush();
  /// Checkpoints that failed only because a node writing some of their shards was lost.
  /// A run that ends (it recovered from each such loss) reports them, and exits 0 for them.
  const std::vector<checkpoint::FailedWrite>& lost_with_nodes() const { return lost_; }
  /// The step the run stopped at after SIGTERM, if it did (with no checkpoint when the
  /// settings' `writes` is false).
  std::optional<std::int64_t> stopped_at() const { return stopped_at_; }
  std::optional<checkpoint::WriteResult> last_written() const { return writer_.last_written(); }
  /// Checkpoints taken, and the milliseconds the step loop spent on them in all: from the
  /// boundary's decision to the snapshot queued (stages' copies, the hand-off), not the disk.
  std::int64_t taken() const { return taken_; }
  double step_loop_ms() const { return step_loop_ms_; }
  /// `f` is called with each checkpoint found newly written, on the thread that calls
  /// at_boundary(), take() and flush() (the coordinator's, then the caller's at the end):
  /// the metrics log's `checkpoint` row, in step order with the other rows. Every write is
  /// seen, in order, also one that finished while the next was queued.
  void on_written(std::function<void(const checkpoint::WriteResult&)> f) { on_written_ = std::move(f); }

 private:
  TrainingObserver& metrics_;
  CheckpointSettings settings_;
  std::function<bool()> stop_requested_;
  // When faults are injected: the disk that stalls, under the one that lies.
  std::unique_ptr<checkpoint::StallingFilesystem> stalling_;
  std::unique_ptr<checkpoint::CorruptingFilesystem> corrupting_;
  checkpoint::Filesystem& fs_;
  checkpoint::BackgroundWriter writer_;
  std::optional<std::int64_t> stopped_at_;
  std::optional<std::int64_t> last_taken_;  // steps_done of the newest take()
  bool stop_noted_ = false;                 // a deferred stop was announced
  std::chrono::steady_clock::time_point decided_;  // when at_boundary asked for a snapshot
  std::int64_t taken_ = 0;
  double step_loop_ms_ = 0;
  std::vector<std::string> failed_;  // background writes that failed, reported as they were found
  std::vector<checkpoint::FailedWrite> lost_;  // those lost with a node instead
  std::function<void(const checkpoint::WriteResult&)> on_written_;
  std::int64_t reported_step_ = -1;  // the newest checkpoint handed to on_written_
  // Every layout the job ran on (stages, partition in half blocks): the resumed
  // checkpoint's, the one it started with, then each on_relayout's; a checkpoint of any of
  // them is this run's to cut.
  std::set<std::pair<int, std::vector<std::int64_t>>> layouts_;
  void note_failed_writes();
  void report_written();
  void note_deferred_stop(std::int64_t steps_done);
};

}  // namespace conveyor
