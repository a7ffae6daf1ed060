#include "apps/watch/status_json.hpp"

namespace conveyor::watch {
namespace {

using nlohmann::json;

template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json curve_json(const std::vector<CurvePoint>& curve) {
  json out = json::array();
  for (const auto& p : curve) out.push_back({p.step, p.value});
  return out;
}

}  // namespace

json status_json(const RunStatus& s) {
  json stages = json::array();
  for (const auto& st : s.stages)
    stages.push_back({{"stage", st.stage},
                      {"pipeline_stage", st.pipeline_stage},
                      {"replica", st.replica},
                      {"device", st.device},
                      {"node", st.node},
                      {"busy_ms", or_null(st.busy_ms)},
                      {"busy_ratio", or_null(st.busy_ratio)}});
  json totals = json::object();
  for (const auto& kind : known_recovery_kinds()) totals[kind] = 0;
  for (const auto& [kind, n] : s.recoveries) totals[kind] = n;
  json recent = json::array();
  for (const auto& r : s.recent_recoveries)
    recent.push_back({{"fault", r.fault},
                      {"stages", r.stages},
                      {"step", r.step},
                      {"restored_step", r.restored_step},
                      {"recovery_ms", r.recovery_ms},
                      {"reason", r.reason}});
  json last_checkpoint = nullptr;
  if (const auto& c = s.last_checkpoint)
    last_checkpoint = {{"step", c->step}, {"seconds", c->seconds}, {"bytes", c->bytes}, {"path", c->path}};
  json last_step = nullptr;
  if (const auto& st = s.last_step)
    last_step = {{"step", st->step},         {"loss", st->loss},     {"lr", st->lr},
                 {"grad_norm", st->grad_norm}, {"tokens_per_s", st->tokens_per_s},
                 {"step_ms", st->step_ms},   {"bubble", st->bubble}};
  json events = json::array();
  for (const auto& e : s.recent_events)
    events.push_back({{"kind", e.kind}, {"step", or_null(e.step)}, {"detail", e.detail}});
  json sample = nullptr;
  if (const auto& t = s.last_sample) sample = {{"step", t->step}, {"text", t->text}, {"prompt", t->prompt}};
  json nodes = json::array();
  for (int n : s.nodes()) nodes.push_back({{"node", n}, {"alive", !s.nodes_down.contains(n)}});
  json summary = nullptr;
  if (s.state == RunState::finished)
    summary = {{"final_loss", or_null(s.final_loss)},
               {"final_val_loss", or_null(s.final_val_loss)},
               {"tokens_per_s", or_null(s.mean_tokens_per_s)}};
  return {{"run", s.run_name},
          {"state", run_state_name(s.state)},
          {"step", s.steps_done()},
          {"steps", or_null(s.total_steps)},
          {"eta_s", or_null(s.eta_seconds())},
          {"job",
           {{"model",
             {{"arch", s.model_arch},
              {"layers", or_null(s.layers)},
              {"d_model", or_null(s.d_model)},
              {"heads", or_null(s.heads)},
              {"seq_len", or_null(s.seq_len)},
              {"vocab", or_null(s.vocab)}}},
            {"devices", s.device_kind},
            {"schedule", s.schedule},
            {"stages", s.pipeline_stages},
            {"micro_batches", s.micro_batches},
            {"data_parallel", s.data_parallel},
            {"model_flops_per_token", or_null(s.model_flops_per_token)}}},
          {"last_step", last_step},
          {"eval_loss", or_null(s.eval_loss)},
          {"model_flops_per_s", or_null(s.model_flops_per_s())},
          {"model_flops_utilization", or_null(s.model_flops_utilization())},
          {"stages", stages},
          {"stages_alive", s.stages_alive()},
          {"nodes", nodes},
          {"events", events},
          {"sample", sample},
          {"bubble",
           {{"measured", s.last_step ? json(s.last_step->bubble) : json(nullptr)},
            {"measured_mean", or_null(s.mean_bubble)},
            {"simulated", or_null(s.simulated_bubble)}}},
          {"curves", {{"loss", curve_json(s.loss_curve)}, {"eval_loss", curve_json(s.eval_curve)}}},
          {"recoveries", {{"total", totals}, {"recent", recent}}},
          {"checkpoints", {{"count", s.checkpoints}, {"last", last_checkpoint}}},
          {"stragglers", s.stragglers},
          {"skipped_steps", s.skipped_steps},
          {"nodes_lost", s.nodes_lost},
          {"resumed_from", or_null(s.resumed_from)},
          {"summary", summary},
          {"stop_reason", or_null(s.stop_reason)},
          {"rows", {{"read", s.rows}, {"unknown", s.unknown_rows}, {"unreadable", s.unreadable_rows}}}};
}

}  // namespace conveyor::watch
