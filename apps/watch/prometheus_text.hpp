#pragma once
// A run's status as Prometheus text exposition format (version 0.0.4): every metric
// family with its # HELP and # TYPE lines, gauges and counters, label values escaped
// (backslash, double quote, newline). A value not known yet (no step, no evaluation, MFU
// on CPU stages) leaves its family without a sample rather than reporting a made-up 0.
//
// The families (README "Watching a run" lists them for users):
//   conveyor_step                      gauge    train steps done
//   conveyor_steps_planned             gauge    train.steps
//   conveyor_loss                      gauge    the last step's training loss
//   conveyor_eval_loss                 gauge    the last evaluation's loss
//   conveyor_learning_rate             gauge
//   conveyor_grad_norm                 gauge    before clipping
//   conveyor_step_seconds              gauge    the last step's wall time
//   conveyor_tokens_per_second         gauge    the last step's
//   conveyor_model_flops_per_second    gauge    model FLOPs (forward + backward matmuls)
//   conveyor_model_flops_utilization   gauge    of the devices' bf16 peak (GPU stages only)
//   conveyor_stage_busy_ratio{stage,device,node}  gauge  busy share of the last step
//   conveyor_bubble_ratio              gauge    measured idle share of the last step
//   conveyor_bubble_simulated_ratio    gauge    the simulator's, with measured durations
//                                               (the summary row: a finished run)
//   conveyor_recoveries_total{kind}    counter
//   conveyor_stragglers_total          counter
//   conveyor_skipped_steps_total       counter  non-finite steps skipped (fault.on_nan)
//   conveyor_checkpoints_total         counter  checkpoints written
//   conveyor_checkpoint_seconds        gauge    the last checkpoint's background write
//   conveyor_eta_seconds               gauge
//   conveyor_run_finished              gauge    1 once the run ended (finished or stopped)
#include <string>
#include <string_view>

#include "apps/watch/run_status.hpp"

namespace conveyor::watch {

/// The Content-Type of the text this renders.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const RunStatus& s);

/// A label value as the format writes it between its double quotes.
std::string escape_label_value(std::string_view value);
/// A sample value: shortest round-trip decimal; NaN, +Inf, -Inf as the format spells them.
std::string sample_value(double v);

}  // namespace conveyor::watch
