#pragma once
// A run folder written by train's own writers, without training: config.yaml from the
// loaded config (to_yaml), plan.json from the job's plan (plan_json), and metrics.jsonl
// rows from MetricsLog, the observer train reports to. What the watch reads is what
// these write, so a change of a row's shape fails these tests.
#include <filesystem>
#include <memory>

#include "apps/config/config_loader.hpp"
#include "apps/train/job_builder.hpp"
#include "apps/train/metrics_log.hpp"
#include "apps/train/plan_json.hpp"
#include "apps/train/progress.hpp"
#include "apps/train/run_dir.hpp"

namespace conveyor::testing {

/// tiny.yaml (4 CPU stages, 1F1B) for 10 steps. Step k's row: loss 5 - 0.1 k, step_ms
/// 100, stage s busy (s + 1) * 10 ms, tokens_per_s 1000 + k.
class RunFixture {
 public:
  explicit RunFixture(const std::filesystem::path& dir)
      : dir_(dir),
        config_(load_run_config(std::string(CONVEYOR_SOURCE_DIR) + "/configs/tiny.yaml",
                                {"train.steps=10", "data.path=" + std::string(CONVEYOR_SOURCE_DIR) +
                                                       "/data/tiny_corpus.txt"})),
        plan_(build_job_plan(config_)),
        progress_(config_.train.steps, false) {
    write_file_atomically(dir_ / "config.yaml", to_yaml(config_));
    write_file_atomically(dir_ / "plan.json", plan_json(plan_, {}).dump(2) + "\n");
    log_ = std::make_unique<MetricsLog>(dir_ / "metrics.jsonl", plan_.schedule, progress_,
                                        config_.fault.straggler_factor,
                                        static_cast<int>(config_.fault.straggler_steps));
  }

  void step(std::int64_t k) {
    StepMetrics m;
    m.step = k;
    m.loss = 5.0 - 0.1 * static_cast<double>(k);
    m.lr = 1e-3;
    m.grad_norm = 0.5;
    m.step_ms = 100.0;
    m.tokens_per_s = 1000.0 + static_cast<double>(k);
    m.bubble = 0.25;
    m.stage_busy_ms = {10.0, 20.0, 30.0, 40.0};
    log_->on_step(m, {});
  }
  void eval(std::int64_t after_step, double loss) { log_->on_eval({after_step, loss}); }
  void crash(std::int64_t at_step) {
    RecoveryEvent e;
    e.fault = "crash";
    e.stages = {2};
    e.step = at_step;
    e.restored_step = at_step - 1;
    e.respawned = {2};
    e.recovery_ms = 12.5;
    e.reason = "stage 2 \"crashed\"\nbadly";
    log_->on_recovery(e);
  }
  void checkpoint(std::int64_t step, double seconds) {
    checkpoint::WriteResult w;
    w.step = step;
    w.seconds = seconds;
    w.bytes = 12345;
    w.path = (dir_ / "checkpoints" / ("step-" + std::to_string(step))).string();
    log_->checkpoint_written(w);
  }
  void node_lost(int node) { log_->on_node_lost(node, "node " + std::to_string(node) + " stopped answering", 60.0); }
  /// Any other row as a writer of it would append it (a sample, a replan).
  void event(const nlohmann::json& row) { log_->event(row); }
  const RunConfig& config() const { return config_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  RunConfig config_;
  JobPlan plan_;
  Progress progress_;
  std::unique_ptr<MetricsLog> log_;
};

}  // namespace conveyor::testing
