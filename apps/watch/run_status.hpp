#pragma once
// What a run looks like now, as plain data: the job (config.yaml, plan.json) and what its
// metrics.jsonl rows said so far. Built by applying the run folder's files in the order
// they were written (run_folder.hpp); rendered by prometheus_text.hpp and status_json.hpp.
// No I/O here, no clock: the same rows give the same status.
//
// Rows are metrics_log.hpp's: step rows carry `step`; the others carry `event` (eval,
// recovery, straggler, nan, node_lost, replan, checkpoint, resume, init_from, stopped,
// summary, sample: `{"event":"sample","step":S,"text":"..."}`, a text the model wrote).
// A row of a kind this file does not know is counted and otherwise ignored, so a newer
// writer's rows do not break an older reader.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor::watch {

/// One stage actor of the plan and its share of the last step.
struct StageStatus {
  int stage = 0;           // the actor's rank: its index in a step row's stage_busy_ms
  int pipeline_stage = 0;  // its place in the pipeline (equal to stage with one replica)
  int replica = 0;
  std::string device;      // "cpu" or "cuda:1" (Device::str)
  int node = 0;            // the process that runs it (0 in a one-process job)
  std::optional<double> busy_ms;     // of the last step
  std::optional<double> busy_ratio;  // busy_ms / step_ms of the last step
};

/// A point of a curve: the value after train step `step` (0-based, as the rows count).
struct CurvePoint {
  std::int64_t step = 0;
  double value = 0.0;
};

struct RecoveryStatus {
  std::string fault;  // crash | hang | nan | node | collective
  std::vector<int> stages;
  std::int64_t step = 0;
  std::int64_t restored_step = 0;
  double recovery_ms = 0.0;
  std::string reason;
};

struct CheckpointStatus {
  std::int64_t step = 0;  // steps the checkpoint holds
  double seconds = 0.0;   // its background write
  std::uint64_t bytes = 0;
  std::string path;
};

/// The newest text sample the model wrote (a `sample` row).
struct SampleStatus {
  std::int64_t step = 0;
  std::string text;
  std::string prompt;  // empty when the row names none
};

/// A row the page lists as it happened: recovery, node_lost, replan (and rejoin or
/// restart rows, should a writer add them), resume, stopped. `detail` is one line for a
/// person.
struct EventStatus {
  std::string kind;                 // the row's event (a recovery's: its fault, as "recovery: crash")
  std::optional<std::int64_t> step;
  std::string detail;
};

/// The last step row.
struct StepStatus {
  std::int64_t step = 0;  // 0-based
  double loss = 0.0, lr = 0.0, grad_norm = 0.0, tokens_per_s = 0.0, step_ms = 0.0, bubble = 0.0;
};

enum class RunState { starting, running, finished, stopped };
std::string_view run_state_name(RunState s);

/// The recovery kinds RecoveryEvent::fault takes (actors/plan/training_observer.hpp): each
/// is reported, 0 until it happens, so that a dashboard's rate() has a series from the start.
const std::vector<std::string>& known_recovery_kinds();

struct RunStatus {
  std::string run_name;  // the run folder's name (RunFolder sets it; train writes no job name)
  // config.yaml
  std::optional<std::int64_t> total_steps;  // train.steps
  std::string model_arch;                   // model.arch
  std::optional<std::int64_t> layers, d_model, heads, seq_len, vocab;
  std::string device_kind;                  // devices.kind
  std::optional<double> model_flops_per_token;  // forward + backward, matmuls (3 × forward)
  // plan.json
  std::string schedule;
  int pipeline_stages = 0, micro_batches = 0, data_parallel = 1;
  std::vector<StageStatus> stages;  // by rank
  // metrics.jsonl
  RunState state = RunState::starting;
  std::optional<StepStatus> last_step;
  std::int64_t step_rows = 0;
  std::vector<CurvePoint> loss_curve;  // thinned to at most kMaxCurvePoints (thin_curve)
  std::vector<CurvePoint> eval_curve;
  std::optional<double> eval_loss;     // the last evaluation's
  std::vector<double> recent_step_ms;  // the last kEtaWindow steps', for the ETA
  std::map<std::string, std::int64_t> recoveries;  // by fault kind
  std::vector<RecoveryStatus> recent_recoveries;   // the last kRecentRecoveries
  std::int64_t stragglers = 0, skipped_steps = 0, nodes_lost = 0;
  std::int64_t checkpoints = 0;
  std::optional<CheckpointStatus> last_checkpoint;
  std::optional<std::string> resumed_from;
  std::optional<SampleStatus> last_sample;
  std::vector<EventStatus> recent_events;  // the last kRecentEvents, oldest first
  std::set<int> nodes_down;  // lost (node_lost) and not back yet (a node recovery or a replan)
  // the summary row (a finished run)
  std::optional<double> mean_tokens_per_s, mean_bubble, simulated_bubble;
  std::optional<double> final_loss, final_val_loss;
  std::optional<std::string> stop_reason;  // a stopped row's signal
  std::int64_t rows = 0, unknown_rows = 0, unreadable_rows = 0;

  static constexpr std::size_t kMaxCurvePoints = 2000;
  static constexpr std::size_t kEtaWindow = 20;
  static constexpr std::size_t kRecentRecoveries = 20;
  static constexpr std::size_t kRecentEvents = 50;
  static constexpr std::size_t kMaxSampleBytes = 16 * 1024;  // a longer text is cut

  /// The nodes that run stage actors (plan.json), ascending.
  std::vector<int> nodes() const;
  /// Stage actors whose node is not down.
  int stages_alive() const;

  /// Train steps done: the last step row's step + 1 (0 before the first).
  std::int64_t steps_done() const { return last_step ? last_step->step + 1 : 0; }
  /// Seconds to the last step at the mean pace of the recent steps; none before a step,
  /// without train.steps, or once the run ended.
  std::optional<double> eta_seconds() const;
  /// Model FLOPs per second achieved at the last step's tokens/s.
  std::optional<double> model_flops_per_s() const;
  /// model_flops_per_s over the stages' devices' peak, where that peak is known (GPUs:
  /// the ceiling `bench kernels` measures against); none on CPU stages.
  std::optional<double> model_flops_utilization() const;
};

/// config.yaml's text (the whole config as `train` resolved it). Throws InputError naming
/// the file on YAML that does not parse.
void apply_config(RunStatus& s, const std::string& yaml_text);
/// plan.json, parsed.
void apply_plan(RunStatus& s, const nlohmann::json& plan);
/// One metrics.jsonl row, parsed; rows must come in file order.
void apply_row(RunStatus& s, const nlohmann::json& row);
/// A line of metrics.jsonl that is not a JSON object (counted, not applied).
inline void note_unreadable_row(RunStatus& s) {
  ++s.rows;
  ++s.unreadable_rows;
}

/// Keeps a curve within `max_points` by dropping every other point but the last when it
/// grows past it: memory and the JSON stay bounded over any run length, and the curve
/// keeps its shape (evenly thinned) and its newest point.
void thin_curve(std::vector<CurvePoint>& curve, std::size_t max_points);

}  // namespace conveyor::watch
