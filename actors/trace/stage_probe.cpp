#include "actors/trace/stage_probe.hpp"

#include <algorithm>
#include <chrono>

namespace conveyor::trace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StageProbe::StageProbe(int rank, std::int64_t epoch_ns, const Placement& placement,
                       TraceBuffer* buffer, StageProgress* progress)
    : rank_(rank), epoch_ns_(epoch_ns), placement_(placement), buffer_(buffer), progress_(progress) {}

Record StageProbe::base(RecordKind kind, std::int64_t t) const {
  Record r;
  r.kind = kind;
  r.start_ns = r.end_ns = t;
  r.step = step_;
  r.round = static_cast<std::uint32_t>(round_);
  r.stage = static_cast<std::int16_t>(rank_);
  r.phase = static_cast<std::uint8_t>(phase_);
  return r;
}

std::size_t StageProbe::input_key(bool gradient, int model_stage, int micro_batch) {
  // Micro-batch ids are small and dense (per step); grow on demand, never shrink.
  const std::size_t stages = static_cast<std::size_t>(placement_.model_stages());
  const std::size_t key =
      (static_cast<std::size_t>(micro_batch) * stages + static_cast<std::size_t>(model_stage)) * 2 +
      (gradient ? 1 : 0);
  if (key >= input_cause_.size()) input_cause_.resize(key + 1, 0);
  return key;
}

void StageProbe::plan_received(const StepPlan& plan) {
  round_ = plan.round;
  step_ = plan.step;
  phase_ = plan.phase;
  // Only an evaluation's wave needs it (a train plan always starts at micro-batch 0).
  first_mb_ = 0;
  if (plan.phase == Phase::eval && plan.actions && !plan.actions->empty()) {
    first_mb_ = plan.actions->front().micro_batch;
    for (const auto& a : *plan.actions) first_mb_ = std::min<std::int64_t>(first_mb_, a.micro_batch);
  }
  const std::int64_t t = now_ns();
  if (progress_)
    progress_->publish(StageState::waiting, round_, step_, phase_ == Phase::eval, 0, t, first_mb_);
  plan_record_ = 0;
  if (!tracing()) return;
  Record r = base(RecordKind::plan_receive, t);
  r.id = plan_record_ = buffer_->next_id();
  r.cause = plan.trace_id;
  r.peer = kCoordinator;
  buffer_->add(r);
}

void StageProbe::sending(PipeMessage& m, int peer_rank) {
  if (!tracing() || m.round != round_) return;
  Record r = base(RecordKind::pipe_send, now_ns());
  r.id = m.trace_id = buffer_->next_id();
  r.cause = current_action_;
  r.micro_batch = m.micro_batch;
  r.peer = static_cast<std::int16_t>(peer_rank);
  r.action = static_cast<std::uint8_t>(m.kind == PipeKind::activation ? sched::ActionKind::F
                                                                      : sched::ActionKind::B);
  r.chunk = static_cast<std::uint8_t>(placement_.chunk_of(m.from_model_stage).chunk);
  r.bytes = m.tensor.bytes();
  buffer_->add(r);
}

void StageProbe::received(const PipeMessage& m) {
  // A message for the next plan (early) is recorded under its own step and round.
  if (!buffer_ || !buffer_->wants(m.step)) return;
  Record r = base(RecordKind::pipe_receive, now_ns());
  r.step = m.step;
  r.round = static_cast<std::uint32_t>(m.round);
  r.phase = static_cast<std::uint8_t>(m.phase);
  r.id = buffer_->next_id();
  r.cause = m.trace_id;
  r.micro_batch = m.micro_batch;
  r.peer = static_cast<std::int16_t>(placement_.chunk_of(m.from_model_stage).rank);
  const bool gradient = m.kind == PipeKind::gradient;
  r.action = static_cast<std::uint8_t>(gradient ? sched::ActionKind::B : sched::ActionKind::F);
  r.chunk = static_cast<std::uint8_t>(placement_.chunk_of(m.to_model_stage).chunk);
  r.bytes = m.tensor.bytes();
  buffer_->add(r);
  input_cause_[input_key(gradient, m.to_model_stage, m.micro_batch)] = r.id;
}

void StageProbe::use_device_clocks(std::vector<DeviceActionClock*> by_chunk) {
  const bool any = std::any_of(by_chunk.begin(), by_chunk.end(), [](auto* c) { return c; });
  clocks_ = any ? std::move(by_chunk) : std::vector<DeviceActionClock*>{};  // CPU: host times
}

void StageProbe::action_started(const StepPlan& plan, std::size_t slot) {
  if (progress_)
    progress_->publish(StageState::running, round_, step_, phase_ == Phase::eval,
                       static_cast<std::int64_t>(slot), now_ns(), first_mb_);
  current_action_ = tracing() ? buffer_->next_id() : 0;
  action_clock_ = nullptr;
  if (!current_action_ || clocks_.empty()) return;
  resolve_device_times(false);
  const int chunk = (*plan.actions)[slot].chunk;
  if (chunk >= 0 && chunk < static_cast<int>(clocks_.size()) && clocks_[chunk]) {
    action_clock_ = clocks_[chunk];
    action_token_ = action_clock_->begin();
  }
}

void StageProbe::resolve_device_times(bool wait) {
  for (std::size_t c = 0; c < clocks_.size(); ++c) {
    DeviceActionClock* clock = clocks_[c];
    if (!clock || std::find(clocks_.begin(), clocks_.begin() + c, clock) != clocks_.begin() + c)
      continue;  // none, or a clock shared by chunks and seen already
    for (const DeviceSpan& span : wait ? clock->drain() : clock->poll()) {
      auto it = std::find_if(awaiting_.begin(), awaiting_.end(), [&](const AwaitingDevice& a) {
        return a.clock == clock && a.token == span.token;
      });
      if (it == awaiting_.end()) continue;  // begun by an action whose record was not kept
      it->record.start_ns = span.start_ns;
      it->record.end_ns = span.end_ns;
      buffer_->add(it->record);
      awaiting_.erase(it);
    }
  }
}

void StageProbe::action_finished(const StepPlan& plan, std::size_t slot, const ActionTiming& t) {
  const std::int64_t end = epoch_ns_ + t.end_ns;
  if (progress_)
    progress_->publish(StageState::waiting, round_, step_, phase_ == Phase::eval,
                       static_cast<std::int64_t>(slot) + 1, end, first_mb_);
  if (!current_action_) return;
  const sched::Action& a = (*plan.actions)[slot];
  Record r = base(RecordKind::action, epoch_ns_ + t.start_ns);
  r.end_ns = end;
  r.id = current_action_;
  r.micro_batch = a.micro_batch;
  r.action = static_cast<std::uint8_t>(a.kind);
  r.chunk = static_cast<std::uint8_t>(a.chunk);
  r.cause = plan_record_;
  // Ranks past the placement are other data-parallel replicas of its stages (replica-major).
  const auto& chunks = placement_.ranks.at(static_cast<std::size_t>(rank_) % placement_.ranks.size()).chunks;
  if (a.chunk >= 0 && a.chunk < static_cast<int>(chunks.size())) {
    const int ms = chunks[a.chunk].model_stage;
    const bool f = a.kind == sched::ActionKind::F;
    const bool needs_input = f ? ms > 0
                               : sched::is_input_backward(a.kind) && ms < placement_.model_stages() - 1;
    if (needs_input) {
      auto& cause = input_cause_[input_key(!f, ms, a.micro_batch)];
      if (cause) r.cause = cause;
      cause = 0;
    }
  }
  if (action_clock_) {
    action_clock_->end(action_token_);
    awaiting_.push_back({r, action_clock_, action_token_});
    action_clock_ = nullptr;
  } else {
    buffer_->add(r);
  }
  current_action_ = 0;
}

void StageProbe::report_sending(StageReport& report) {
  const std::int64_t t = now_ns();
  if (progress_) progress_->publish(StageState::idle, round_, step_, phase_ == Phase::eval, 0, t, first_mb_);
  if (!awaiting_.empty()) resolve_device_times(true);
  if (!tracing()) return;
  Record r = base(RecordKind::report_send, t);
  r.id = report.trace_id = buffer_->next_id();
  r.cause = plan_record_;
  r.peer = kCoordinator;
  buffer_->add(r);
}

void StageProbe::plan_aborted() {
  const std::int64_t t = now_ns();
  if (!awaiting_.empty()) resolve_device_times(true);
  current_action_ = 0;
  if (progress_) progress_->publish(StageState::idle, round_, step_, phase_ == Phase::eval, 0, t, first_mb_);
}

void StageProbe::optimizer_received(const OptimizerStep& step) {
  optimizer_record_ = 0;
  if (!buffer_ || !buffer_->wants(step.step)) return;
  Record r = base(RecordKind::optimizer_receive, now_ns());
  r.step = step.step;
  r.id = optimizer_record_ = buffer_->next_id();
  r.cause = step.trace_id;
  r.peer = kCoordinator;
  buffer_->add(r);
}

void StageProbe::done_sending(OptimizerDone& done) {
  if (!buffer_ || !buffer_->wants(done.step)) return;
  const std::int64_t t = now_ns();
  Record r = base(RecordKind::done_send, t);
  r.step = done.step;
  r.id = done.trace_id = buffer_->next_id();
  r.cause = optimizer_record_;
  r.peer = kCoordinator;
  // The optimizer step itself is this stage's work between the two records.
  buffer_->add(r);
}

}  // namespace conveyor::trace
