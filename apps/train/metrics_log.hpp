#pragma once
// metrics.jsonl: one JSON object per line, appended and flushed after every step so a
// crash loses nothing already reported. Step rows carry `step`; other rows (evaluations,
// the summary, events added later) carry `event` instead.
#include <optional>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/fault/straggler_detector.hpp"
#include "actors/runtime/action_duration_stats.hpp"
#include "actors/job/job_services.hpp"
#include "apps/train/progress.hpp"

namespace conveyor {

class MetricsLog final : public TrainingObserver {
 public:
  /// straggler_factor, straggler_steps: fault.straggler_* (actors/fault/straggler_detector.hpp).
  MetricsLog(const std::filesystem::path& file, const sched::Schedule& schedule,
             Progress& progress, double straggler_factor, int straggler_steps);
  ~MetricsLog() override;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  /// A step row; a `straggler` row and a progress note for each stage that became a
  /// straggler at this step.
  void on_step(const StepMetrics& m, const std::vector<StageReport>& reports) override;
  void on_eval(const EvalMetrics& m) override;
  /// A `recovery` row, and a line on the progress display.
  void on_recovery(const RecoveryEvent& e) override;
  /// A progress note saying what the run waits for, and a `node_lost` row.
  void on_node_lost(int node, const std::string& why, double wait_s) override;
  /// Issue 44's shrink: the `replan` row, its log line on the progress display, and the
  /// run folder's plan.json rewritten for the new layout with its "generation" (the file
  /// sits beside metrics.jsonl; the first plan.json, without the key, is generation 0).
  void on_replan(const ReplanEvent& e, const JobPlan& plan, const std::vector<int>& node_of_rank,
                 int generation) override;
  /// `f` is called at each on_replan, after the row, with its plan, nodes and generation
  /// (a traced run's schedule.json takes the new layout: apps/trace/trace_setup.hpp).
  void on_relayout(std::function<void(const JobPlan&, const std::vector<int>&, int)> f) {
    on_relayout_ = std::move(f);
  }
  /// A `checkpoint` row: a checkpoint's write finished (step, seconds, bytes, path).
  void checkpoint_written(const checkpoint::WriteResult& w);
  /// Any other row; REQUIRES: row has an "event" key.
  void event(const nlohmann::json& row);

  /// Means over the steps after the first two (allocation and page faults); nullopt when
  /// the run took no such step.
  std::optional<double> mean_tokens_per_s() const;
  std::optional<double> mean_bubble() const;
  /// The simulator's bubble for this schedule fed the mean measured action durations.
  double simulated_bubble() const;
  /// The simulator's bubble replaying each step with its actions' measured durations.
  double replayed_bubble() const { return durations_.replayed_bubble(); }

 private:
  void append(const nlohmann::json& row);
  /// Truncates the file after its last newline; returns the bytes dropped.
  std::int64_t drop_partial_row();
  std::filesystem::path path_;
  std::FILE* file_;
  const sched::Schedule& schedule_;
  Progress& progress_;
  ActionDurationStats durations_;
  StragglerDetector stragglers_;
  double tokens_per_s_sum_ = 0, bubble_sum_ = 0;
  std::int64_t counted_ = 0;
  std::function<void(const JobPlan&, const std::vector<int>&, int)> on_relayout_;
};

}  // namespace conveyor
