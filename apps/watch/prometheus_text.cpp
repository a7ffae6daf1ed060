#include "apps/watch/prometheus_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace conveyor::watch {
namespace {

struct Label {
  std::string_view name;
  std::string value;
};

class Writer {
 public:
  // HELP text escapes backslash and newline (ours are fixed text without them).
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    name_ = name;
  }
  void sample(double v, std::initializer_list<Label> labels = {}) {
    out_ += name_;
    if (labels.size() > 0) {
      out_ += '{';
      bool first = true;
      for (const auto& l : labels) {
        out_ += fmt::format("{}{}=\"{}\"", first ? "" : ",", l.name, escape_label_value(l.value));
        first = false;
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += sample_value(v);
    out_ += '\n';
  }
  void sample(const std::optional<double>& v) {
    if (v) sample(*v);
  }
  void gauge(std::string_view name, std::string_view help, const std::optional<double>& v) {
    family(name, "gauge", help);
    sample(v);
  }
  void counter(std::string_view name, std::string_view help, std::int64_t v) {
    family(name, "counter", help);
    sample(static_cast<double>(v));
  }
  std::string text() && { return std::move(out_); }

 private:
  std::string out_;
  std::string_view name_;
};

template <class T>
std::optional<double> as_double(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string sample_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string prometheus_text(const RunStatus& s) {
  Writer w;
  const auto& step = s.last_step;
  const auto of_step = [&](double StepStatus::*field) {
    return step ? std::optional<double>((*step).*field) : std::nullopt;
  };
  w.gauge("conveyor_step", "Train steps done.", static_cast<double>(s.steps_done()));
  w.gauge("conveyor_steps_planned", "Train steps the run was started for (train.steps).", as_double(s.total_steps));
  w.gauge("conveyor_loss", "Training loss of the last step (mean over its micro-batches).", of_step(&StepStatus::loss));
  w.gauge("conveyor_eval_loss", "Validation loss of the last evaluation.", s.eval_loss);
  w.gauge("conveyor_learning_rate", "Learning rate of the last step.", of_step(&StepStatus::lr));
  w.gauge("conveyor_grad_norm", "Global gradient norm of the last step, before clipping.",
          of_step(&StepStatus::grad_norm));
  w.gauge("conveyor_step_seconds", "Wall time of the last step.",
          step ? std::optional<double>(step->step_ms / 1000.0) : std::nullopt);
  w.gauge("conveyor_tokens_per_second", "Training tokens per second of the last step.",
          of_step(&StepStatus::tokens_per_s));
  w.gauge("conveyor_model_flops_per_second",
          "Model FLOPs per second of the last step (forward and backward matmuls, 3x the forward).",
          s.model_flops_per_s());
  w.gauge("conveyor_model_flops_utilization",
          "Model FLOPs per second over the stages' devices' bf16 peak (GPU stages only).",
          s.model_flops_utilization());
  w.family("conveyor_stage_busy_ratio", "gauge", "Share of the last step a stage actor spent computing.");
  for (const auto& st : s.stages)
    if (st.busy_ratio)
      w.sample(*st.busy_ratio,
               {{"stage", std::to_string(st.stage)}, {"device", st.device}, {"node", std::to_string(st.node)}});
  w.gauge("conveyor_bubble_ratio", "Measured idle share of the stages over the last step's compute span.",
          of_step(&StepStatus::bubble));
  w.gauge("conveyor_bubble_simulated_ratio",
          "The simulator's bubble replaying the measured action durations (known once the run finished).",
          s.simulated_bubble);
  w.family("conveyor_recoveries_total", "counter", "Recoveries from a fault, by kind.");
  for (const auto& kind : known_recovery_kinds()) {
    const auto it = s.recoveries.find(kind);
    w.sample(it == s.recoveries.end() ? 0.0 : static_cast<double>(it->second), {{"kind", kind}});
  }
  for (const auto& [kind, n] : s.recoveries)  // a kind a newer writer reports
    if (std::ranges::find(known_recovery_kinds(), kind) == known_recovery_kinds().end())
      w.sample(static_cast<double>(n), {{"kind", kind}});
  w.counter("conveyor_stragglers_total", "Stage actors found to be stragglers.", s.stragglers);
  w.counter("conveyor_skipped_steps_total", "Steps whose update was skipped: loss or gradients not finite.",
            s.skipped_steps);
  w.counter("conveyor_checkpoints_total", "Checkpoints written.", s.checkpoints);
  w.gauge("conveyor_checkpoint_seconds", "Seconds the last checkpoint's background write took.",
          s.last_checkpoint ? std::optional<double>(s.last_checkpoint->seconds) : std::nullopt);
  w.gauge("conveyor_eta_seconds", "Seconds to the last step at the recent steps' pace.", s.eta_seconds());
  w.gauge("conveyor_run_finished", "1 once the run ended (finished or stopped), else 0.",
          s.state == RunState::finished || s.state == RunState::stopped ? 1.0 : 0.0);
  return std::move(w).text();
}

}  // namespace conveyor::watch
