#include "actors/trace/coordinator_probe.hpp"

#include "actors/trace/stage_probe.hpp"

namespace conveyor::trace {

Record CoordinatorProbe::base(RecordKind kind, std::int64_t step) const {
  Record r;
  r.kind = kind;
  r.start_ns = r.end_ns = now_ns();
  r.step = step;
  r.round = static_cast<std::uint32_t>(round_);
  r.stage = kCoordinator;
  r.phase = static_cast<std::uint8_t>(phase_);
  return r;
}

void CoordinatorProbe::round_started(std::int64_t round, std::int64_t step, Phase phase) {
  round_ = round;
  phase_ = phase;
  round_record_ = 0;
  if (!tracing(step)) return;
  Record r = base(RecordKind::step_begin, step);
  r.id = round_record_ = buffer_->next_id();
  buffer_->add(r);
}

void CoordinatorProbe::plan_sending(StepPlan& plan, int rank) {
  if (!tracing(plan.step)) return;
  Record r = base(RecordKind::plan_send, plan.step);
  r.id = plan.trace_id = buffer_->next_id();
  r.cause = round_record_;
  r.peer = static_cast<std::int16_t>(rank);
  buffer_->add(r);
}

void CoordinatorProbe::report_received(const StageReport& report) {
  if (!tracing(report.step)) return;
  Record r = base(RecordKind::report_receive, report.step);
  r.phase = static_cast<std::uint8_t>(report.phase);
  r.id = buffer_->next_id();
  r.cause = report.trace_id;
  r.peer = static_cast<std::int16_t>(report.rank);
  buffer_->add(r);
}

void CoordinatorProbe::optimizer_sending(OptimizerStep& step, int rank) {
  if (!tracing(step.step)) return;
  Record r = base(RecordKind::optimizer_send, step.step);
  r.id = step.trace_id = buffer_->next_id();
  r.cause = round_record_;
  r.peer = static_cast<std::int16_t>(rank);
  buffer_->add(r);
}

void CoordinatorProbe::relaid_out(bool joined, int node, std::int64_t step, double ms) {
  // Whatever trace.steps says: the analysis tells which layout ran a round by these records
  // (layout_switch.hpp), and one record per re-layout costs nothing.
  if (!buffer_) return;
  Record r = base(joined ? RecordKind::joined : RecordKind::replan, step);
  r.start_ns = r.end_ns - static_cast<std::int64_t>(ms * 1e6);
  r.id = buffer_->next_id();
  r.peer = static_cast<std::int16_t>(node);
  buffer_->add(r);
}

void CoordinatorProbe::done_received(const OptimizerDone& done) {
  if (!tracing(done.step)) return;
  Record r = base(RecordKind::done_receive, done.step);
  r.id = buffer_->next_id();
  r.cause = done.trace_id;
  r.peer = static_cast<std::int16_t>(done.rank);
  buffer_->add(r);
}

}  // namespace conveyor::trace
