#include "apps/watch/run_status.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "apps/bench/kernel_bench.hpp"
#include "apps/watch/run_events.hpp"
#include "kernels/common/error.hpp"
#include "kernels/model/gpt_stage.hpp"

namespace conveyor::watch {
namespace {

using nlohmann::json;

template <class T>
std::optional<T> yaml_value(const YAML::Node& section, const char* key) {
  if (!section || !section.IsMap() || !section[key]) return std::nullopt;
  try {
    return section[key].as<T>();
  } catch (const YAML::Exception&) {
    return std::nullopt;  // the writer's own file: a key of another type is left out
  }
}

template <class T>
std::optional<T> json_value(const json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// FLOPs of a train step per token through the whole model: forward and backward (twice
// the forward), the matmuls that bench e2e counts (apps/bench/e2e_bench.cpp).
std::optional<double> train_flops_per_token(const YAML::Node& model) {
  GptConfig c;
  const auto layers = yaml_value<std::int64_t>(model, "layers");
  const auto d_model = yaml_value<std::int64_t>(model, "d_model");
  const auto heads = yaml_value<std::int64_t>(model, "heads");
  const auto seq_len = yaml_value<std::int64_t>(model, "seq_len");
  const auto vocab = yaml_value<std::int64_t>(model, "vocab");
  if (!layers || !d_model || !heads || !seq_len || !vocab || *heads <= 0) return std::nullopt;
  c.layers = *layers;
  c.d_model = *d_model;
  c.heads = *heads;
  c.seq_len = *seq_len;
  c.vocab = *vocab;
  if (auto arch = yaml_value<std::string>(model, "arch"))
    if (auto parsed = parse_model_arch(*arch)) c.arch = *parsed;
  c.kv_heads = yaml_value<std::int64_t>(model, "kv_heads").value_or(0);
  c.ffn_dim = yaml_value<std::int64_t>(model, "ffn_dim").value_or(0);
  return 3.0 * gpt_forward_flops_per_token(c);
}

void apply_step(RunStatus& s, const json& row) {
  StepStatus st;
  st.step = row.at("step").get<std::int64_t>();
  st.loss = json_value<double>(row, "loss").value_or(0.0);
  st.lr = json_value<double>(row, "lr").value_or(0.0);
  st.grad_norm = json_value<double>(row, "grad_norm").value_or(0.0);
  st.tokens_per_s = json_value<double>(row, "tokens_per_s").value_or(0.0);
  st.step_ms = json_value<double>(row, "step_ms").value_or(0.0);
  st.bubble = json_value<double>(row, "bubble").value_or(0.0);
  s.last_step = st;
  ++s.step_rows;
  if (s.state == RunState::starting) s.state = RunState::running;
  // A replayed step (after a recovery) comes again: the curve keeps step order.
  while (!s.loss_curve.empty() && s.loss_curve.back().step >= st.step) s.loss_curve.pop_back();
  s.loss_curve.push_back({st.step, st.loss});
  thin_curve(s.loss_curve, RunStatus::kMaxCurvePoints);
  s.recent_step_ms.push_back(st.step_ms);
  if (s.recent_step_ms.size() > RunStatus::kEtaWindow) s.recent_step_ms.erase(s.recent_step_ms.begin());
  const auto busy = json_value<std::vector<double>>(row, "stage_busy_ms").value_or(std::vector<double>{});
  for (auto& stage : s.stages) {
    const auto i = static_cast<std::size_t>(stage.stage);
    if (i >= busy.size()) continue;
    stage.busy_ms = busy[i];
    stage.busy_ratio = st.step_ms > 0 ? std::optional<double>(busy[i] / st.step_ms) : std::nullopt;
  }
}

void apply_recovery(RunStatus& s, const json& row) {
  RecoveryStatus r;
  r.fault = json_value<std::string>(row, "fault").value_or("unknown");
  r.stages = json_value<std::vector<int>>(row, "stages").value_or(std::vector<int>{});
  r.step = json_value<std::int64_t>(row, "step").value_or(0);
  r.restored_step = json_value<std::int64_t>(row, "restored_step").value_or(0);
  r.recovery_ms = json_value<double>(row, "recovery_ms").value_or(0.0);
  r.reason = json_value<std::string>(row, "reason").value_or("");
  ++s.recoveries[r.fault];
  s.recent_recoveries.push_back(std::move(r));
  if (s.recent_recoveries.size() > RunStatus::kRecentRecoveries)
    s.recent_recoveries.erase(s.recent_recoveries.begin());
}

void apply_summary(RunStatus& s, const json& row) {
  s.state = RunState::finished;
  s.mean_tokens_per_s = json_value<double>(row, "tokens_per_s");
  s.mean_bubble = json_value<double>(row, "bubble");
  s.simulated_bubble = json_value<double>(row, "simulated_bubble");
  s.final_loss = json_value<double>(row, "final_loss");
  s.final_val_loss = json_value<double>(row, "final_val_loss");
}

}  // namespace

std::string_view run_state_name(RunState s) {
  switch (s) {
    case RunState::starting: return "starting";
    case RunState::running: return "running";
    case RunState::finished: return "finished";
    case RunState::stopped: return "stopped";
  }
  return "?";
}

const std::vector<std::string>& known_recovery_kinds() {
  static const std::vector<std::string> kinds{"crash", "hang", "nan", "node", "collective"};
  return kinds;
}

std::vector<int> RunStatus::nodes() const {
  std::set<int> nodes;
  for (const auto& st : stages) nodes.insert(st.node);
  return {nodes.begin(), nodes.end()};
}

int RunStatus::stages_alive() const {
  return static_cast<int>(std::ranges::count_if(stages, [&](const StageStatus& st) { return !nodes_down.contains(st.node); }));
}

std::optional<double> RunStatus::eta_seconds() const {
  if (!last_step || !total_steps || recent_step_ms.empty() || state == RunState::finished ||
      state == RunState::stopped)
    return std::nullopt;
  const double mean_ms = std::accumulate(recent_step_ms.begin(), recent_step_ms.end(), 0.0) /
                         static_cast<double>(recent_step_ms.size());
  const auto left = std::max<std::int64_t>(0, *total_steps - steps_done());
  return static_cast<double>(left) * mean_ms / 1000.0;
}

std::optional<double> RunStatus::model_flops_per_s() const {
  if (!last_step || !model_flops_per_token) return std::nullopt;
  return last_step->tokens_per_s * *model_flops_per_token;
}

std::optional<double> RunStatus::model_flops_utilization() const {
  const auto achieved = model_flops_per_s();
  if (!achieved || stages.empty()) return std::nullopt;
  // Distinct devices: stage actors that share a GPU share its peak.
  std::set<std::pair<int, std::string>> devices;
  for (const auto& st : stages) {
    if (!st.device.starts_with("cuda")) return std::nullopt;  // no known peak for a CPU
    devices.insert({st.node, st.device});
  }
  return *achieved / (static_cast<double>(devices.size()) * kBf16MatrixTflops * 1e12);
}

void apply_config(RunStatus& s, const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw InputError("config.yaml: does not parse as YAML: " + std::string(e.what()));
  }
  if (!root.IsMap()) return;
  s.total_steps = yaml_value<std::int64_t>(root["train"], "steps");
  const YAML::Node model = root["model"];
  s.model_arch = yaml_value<std::string>(model, "arch").value_or("gpt2");
  s.layers = yaml_value<std::int64_t>(model, "layers");
  s.d_model = yaml_value<std::int64_t>(model, "d_model");
  s.heads = yaml_value<std::int64_t>(model, "heads");
  s.seq_len = yaml_value<std::int64_t>(model, "seq_len");
  s.vocab = yaml_value<std::int64_t>(model, "vocab");
  s.device_kind = yaml_value<std::string>(root["devices"], "kind").value_or("");
  s.model_flops_per_token = train_flops_per_token(model);
}

void apply_plan(RunStatus& s, const json& plan) {
  s.schedule = json_value<std::string>(plan, "schedule").value_or("");
  s.pipeline_stages = json_value<int>(plan, "stages").value_or(0);
  s.micro_batches = json_value<int>(plan, "micro_batches").value_or(0);
  s.data_parallel = json_value<int>(plan, "data_parallel").value_or(1);
  s.stages.clear();
  // Every replica's actors (plan_json.cpp): numbered by rank, as step rows' stage_busy_ms.
  if (const auto it = plan.find("replicas"); it != plan.end() && it->is_array())
    for (const auto& replica : *it)
      for (const auto& actor : replica.value("stages", json::array())) {
        StageStatus st;
        st.stage = actor.value("stage", 0);
        st.pipeline_stage = actor.value("pipeline_stage", st.stage);
        st.replica = replica.value("replica", 0);
        st.device = actor.value("device", "");
        st.node = actor.value("node", 0);
        s.stages.push_back(std::move(st));
      }
  // A plan.json without the replicas list: its placement (replica 0's ranks).
  if (const auto it = plan.find("placement"); s.stages.empty() && it != plan.end() && it->is_array())
    for (const auto& rank : *it) {
      StageStatus st;
      st.stage = rank.value("stage", 0);
      st.pipeline_stage = st.stage;
      st.replica = rank.value("replica", 0);
      st.device = rank.value("device", "");
      s.stages.push_back(std::move(st));
    }
  std::ranges::sort(s.stages, {}, &StageStatus::stage);
}

void apply_row(RunStatus& s, const json& row) {
  ++s.rows;
  if (!row.is_object()) {
    ++s.unreadable_rows;
    return;
  }
  try {
    if (row.contains("step") && !row.contains("event")) {
      apply_step(s, row);
      return;
    }
    const std::string event = json_value<std::string>(row, "event").value_or("");
    if (note_event_row(s, event, row)) {
      if (event == "recovery") apply_recovery(s, row);
    } else if (event == "eval") {
      const auto loss = json_value<double>(row, "val_loss");
      if (!loss) return;
      s.eval_loss = loss;
      s.eval_curve.push_back({json_value<std::int64_t>(row, "after_step").value_or(0), *loss});
      thin_curve(s.eval_curve, RunStatus::kMaxCurvePoints);
    } else if (event == "straggler") {
      ++s.stragglers;
    } else if (event == "nan") {
      ++s.skipped_steps;
    } else if (event == "node_lost") {
      ++s.nodes_lost;
    } else if (event == "checkpoint") {
      ++s.checkpoints;
      s.last_checkpoint = CheckpointStatus{json_value<std::int64_t>(row, "step").value_or(0),
                                           json_value<double>(row, "seconds").value_or(0.0),
                                           json_value<std::uint64_t>(row, "bytes").value_or(0),
                                           json_value<std::string>(row, "path").value_or("")};
    } else if (event == "resume") {
      s.resumed_from = json_value<std::string>(row, "from");
      if (s.state != RunState::starting) s.state = RunState::running;  // a later process went on
    } else if (event == "stopped") {
      s.state = RunState::stopped;
      s.stop_reason = json_value<std::string>(row, "reason");
    } else if (event == "summary") {
      apply_summary(s, row);
    } else if (event != "init_from") {
      ++s.unknown_rows;
    }
  } catch (const json::exception&) {
    ++s.unreadable_rows;  // a row of the right kind with a field of the wrong type
  }
}

void thin_curve(std::vector<CurvePoint>& curve, std::size_t max_points) {
  if (curve.size() <= max_points || max_points < 2) return;
  const CurvePoint last = curve.back();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < curve.size(); i += 2) curve[kept++] = curve[i];
  curve.resize(kept);
  if (curve.back().step != last.step) curve.push_back(last);
}

}  // namespace conveyor::watch
