#include "apps/train/train_checkpoints.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/checkpoint_log.hpp"
#include "actors/checkpoint/resume.hpp"
#include "actors/checkpoint/staged_shards.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "apps/train/run_dir.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

checkpoint::Filesystem& pick_filesystem(std::unique_ptr<checkpoint::StallingFilesystem>& stalling,
                                        std::unique_ptr<checkpoint::CorruptingFilesystem>& corrupting,
                                        const CheckpointSettings& s) {
  checkpoint::Filesystem* fs = &checkpoint::posix_filesystem();
  if (!s.stalled_steps.empty()) {
    stalling = std::make_unique<checkpoint::StallingFilesystem>(*fs, s.stalled_steps);
    fs = stalling.get();
  }
  if (!s.corrupt_steps.empty()) {
    corrupting = std::make_unique<checkpoint::CorruptingFilesystem>(*fs, s.corrupt_steps);
    fs = corrupting.get();
  }
  return *fs;
}

CheckpointSettings with_stop_every_at_least_1(CheckpointSettings s) {
  s.stop_every = std::max<std::int64_t>(1, s.stop_every);
  return s;
}

}  // namespace

BoundaryDecision checkpoint_decision(std::int64_t steps_done, std::int64_t every,
                                     std::int64_t total_steps, bool stop_requested,
                                     std::int64_t stop_every, bool writes) {
  BoundaryDecision d;
  d.stop = stop_requested && steps_done < total_steps && steps_done % std::max<std::int64_t>(1, stop_every) == 0;
  d.snapshot = writes && (d.stop || (every > 0 && steps_done % every == 0));
  return d;
}

checkpoint::Manifest manifest_base(const JobPlan& plan, const std::string& schedule,
                                   const std::string& config_text) {
  checkpoint::Manifest m;
  m.seed = plan.data.seed;
  m.schedule = schedule;
  set_manifest_layout(m, plan);
  m.config = config_text;
  return m;
}

void set_manifest_layout(checkpoint::Manifest& m, const JobPlan& plan) {
  const auto& names = sched::schedule_names();
  if (std::find(names.begin(), names.end(), plan.schedule.spec.name) != names.end())
    m.schedule = plan.schedule.spec.name;
  m.stages = static_cast<int>(plan.placement.ranks.size());
  m.partition_halves.assign(static_cast<std::size_t>(plan.placement.model_stages()), 0);
  for (const auto& rank : plan.placement.ranks)
    for (const auto& c : rank.chunks)
      m.partition_halves.at(static_cast<std::size_t>(c.model_stage)) = c.slice.num_halves();
}

void prepare_checkpoint_dir(const std::string& dir) {
  try {
    checkpoint::posix_filesystem().make_dirs(dir);
  } catch (const checkpoint::CheckpointError& e) {
    throw InputError("checkpoint.dir: cannot create " + e.path() + " (" + e.reason() + ")");
  }
  refuse_unwritable(dir, "checkpoint.dir");
}

DefaultCheckpointFolder::~DefaultCheckpointFolder() {
  std::error_code ec;
  std::filesystem::remove(dir_, ec);  // removes an empty folder only
}

TrainCheckpoints::TrainCheckpoints(TrainingObserver& metrics, CheckpointSettings settings,
                                   std::function<bool()> stop_requested)
    : metrics_(metrics),
      settings_(with_stop_every_at_least_1(std::move(settings))),
      stop_requested_(std::move(stop_requested)),
      fs_(pick_filesystem(stalling_, corrupting_, settings_)),
      writer_(fs_, checkpoint::BackgroundWriterOptions{settings_.dir, settings_.keep, 1}) {
  layouts_.emplace(settings_.base.stages, settings_.base.partition_halves);
  if (settings_.resumed_layout) layouts_.insert(*settings_.resumed_layout);
}

void TrainCheckpoints::on_relayout(const JobPlan& plan) {
  set_manifest_layout(settings_.base, plan);
  layouts_.emplace(settings_.base.stages, settings_.base.partition_halves);
}

BoundaryDecision TrainCheckpoints::at_boundary(std::int64_t steps_done) {
  report_written();
  const bool requested = stop_requested_ && stop_requested_();
  const auto d = checkpoint_decision(steps_done, settings_.every, settings_.total_steps, requested,
                                     settings_.stop_every, settings_.writes);
  if (d.snapshot) decided_ = std::chrono::steady_clock::now();
  if (d.stop && !settings_.writes) stopped_at_ = steps_done;  // take() never comes
  if (requested && !d.stop) note_deferred_stop(steps_done);
  return d;
}

bool TrainCheckpoints::stop_during_eval(std::int64_t steps_done) {
  if (!stop_requested_ || !stop_requested_()) return false;
  // After the last step the run ends by writing its weights: no checkpoint follows.
  if (steps_done >= settings_.total_steps) return true;
  // The evaluation completes where the run cannot stop at this boundary: one without a
  // snapshot of every node, or one that would stop without a checkpoint (the coordinator
  // captures the state on a stop during an evaluation).
  if (!settings_.writes || steps_done % settings_.stop_every != 0) {
    note_deferred_stop(steps_done);
    return false;
  }
  decided_ = std::chrono::steady_clock::now();
  return true;
}

void TrainCheckpoints::note_deferred_stop(std::int64_t steps_done) {
  if (stop_noted_ || steps_done >= settings_.total_steps) return;
  stop_noted_ = true;
  const std::int64_t every = settings_.stop_every;
  const std::int64_t at = (steps_done / every + 1) * every;
  if (!settings_.writes)
    checkpoint::checkpoint_log().warn("stop requested: the run stops at the next step boundary, without a checkpoint");
  else if (at >= settings_.total_steps)
    checkpoint::checkpoint_log().warn("stop requested after step {}: the run ends at its last step ({}) first, "
                                      "the next one with every node's snapshot (fault.snapshot_every {})",
                                      steps_done, settings_.total_steps, every);
  else
    checkpoint::checkpoint_log().warn("stop requested after step {}: the job stops with a checkpoint after step {}, "
                                      "the next one every node snapshots (fault.snapshot_every {})",
                                      steps_done, at, every);
}

void TrainCheckpoints::take(std::int64_t steps_done, std::vector<checkpoint::StageShard> shards,
                            std::int64_t optimizer_steps, bool stop) {
  if (stop && last_taken_ == steps_done) {  // this boundary's checkpoint, already queued
    writer_.flush();
    report_written();
    stopped_at_ = steps_done;
    return;
  }
  last_taken_ = steps_done;
  checkpoint::Snapshot snapshot;
  snapshot.manifest = settings_.base;
  snapshot.manifest.step = steps_done;
  snapshot.manifest.optimizer_steps = optimizer_steps;
  snapshot.shards = std::move(shards);
  note_failed_writes();  // an earlier write's failure does not stop the run, nor this one
  writer_.submit(std::move(snapshot));
  ++taken_;
  step_loop_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - decided_).count();
  if (!stop) return;
  writer_.flush();  // a preempted process may be killed soon: the checkpoint must be on disk
  report_written();
  stopped_at_ = steps_done;
}

void TrainCheckpoints::report_written() {
  if (!on_written_) return;
  for (const checkpoint::WriteResult& written : writer_.take_written()) {
    if (written.step <= reported_step_) continue;  // a resumed run's step written again
    reported_step_ = written.step;
    on_written_(written);
  }
}

checkpoint::StagingTarget TrainCheckpoints::stage_remote_shards(std::int64_t steps_done) {
  checkpoint::StagingTarget target;
  target.token = checkpoint::make_staging_token();
  // The other nodes are sent this path: absolute, so that it does not depend on their
  // working directories (the folder must be the same on every node anyway).
  const std::string dir = absolute_path(settings_.dir);
  target.staging = checkpoint::staging_dir(dir, steps_done);
  try {
    checkpoint::prepare_staging(fs_, dir, steps_done, target.token);
  } catch (const std::exception& e) {
    target.error = fmt::format("preparing the folder for the other nodes' shards of step {}: {}", steps_done, e.what());
  }
  return target;
}

CheckpointRestorePoint TrainCheckpoints::newest_checkpoint(std::int64_t steps_done, CheckpointLayouts layouts) {
  // A write under way may be the newest; one that fails is noted as at the run's end.
  writer_.wait_idle();
  note_failed_writes();
  try {
    const auto point = checkpoint::resolve_resume(fs_, "latest", settings_.dir, "checkpoint.dir");
    // checkpoint.dir may be shared: the newest must be this run's (or the one it resumed
    // from), never an older one of another run taken instead.
    const auto& m = point.manifest;
    const auto& base = settings_.base;
    if (m.step > steps_done || m.step < settings_.first_step)
      return {"", 0, fmt::format("the newest checkpoint, {}, holds {} steps, outside the steps {} to {} "
                                 "of this run (a checkpoint of another run?)",
                                 point.path, m.step, settings_.first_step, steps_done)};
    const bool layout_ok = layouts == CheckpointLayouts::current
                               ? m.stages == base.stages && m.partition_halves == base.partition_halves
                               : layouts_.count({m.stages, m.partition_halves}) > 0;
    if (m.seed != base.seed || !layout_ok)
      return {"", 0, fmt::format("the newest checkpoint, {}, was written with another seed, stage "
                                 "count or partition than {} (another job's?)", point.path,
                                 layouts == CheckpointLayouts::current ? "this run's now"
                                                                       : "any this run ran on")};
    return {point.path, m.step, ""};
  } catch (const std::exception& e) {
    return {"", 0, e.what()};
  }
}

void TrainCheckpoints::note_failed_writes() {
  for (auto& e : writer_.take_errors()) {
    if (e.lost_node) {
      // The node's loss is the run's to recover from (a replacement rejoins, or the job
      // fails for it); its half-written checkpoint is no further fault of the run.
      checkpoint::checkpoint_log().warn("the checkpoint of step {} went down with node {}, which was writing "
                                        "some of its shards; once the run recovers from that loss, the next "
                                        "checkpoint holds these steps",
                                        e.step, *e.lost_node);
      lost_.push_back(std::move(e));
      continue;
    }
    checkpoint::checkpoint_log().warn("training goes on after that failed checkpoint (the next ones are still "
                                      "tried); the run will exit 1 at its end");
    failed_.push_back(std::move(e.message));
  }
}

void TrainCheckpoints::flush() {
  writer_.wait_idle();
  note_failed_writes();
  report_written();
  if (failed_.empty()) return;
  std::string message = failed_.front();
  for (std::size_t i = 1; i < failed_.size(); ++i) message += "; " + failed_[i];
  throw checkpoint::CheckpointError(settings_.dir, std::to_string(failed_.size()) +
                                                       " checkpoint write(s) of this run failed: " + message);
}

}  // namespace conveyor
