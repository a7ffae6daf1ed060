#include "actors/trace/watchdog.hpp"

#include <algorithm>
#include <utility>
#include <fmt/format.h>

#include "actors/plan/schedule/action.hpp"
#include "actors/trace/stage_probe.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor::trace {

std::string describe_record(const Record& r, std::int64_t t0_ns) {
  const std::string who = r.stage == kCoordinator ? "coordinator" : fmt::format("stage {}", r.stage);
  std::string what(record_kind_name(r.kind));
  if (r.action != kNoAction) {
    const auto k = sched::kind_name(static_cast<sched::ActionKind>(r.action));
    what += fmt::format(" {}", k);
  }
  if (r.micro_batch >= 0) what += fmt::format(" micro-batch {}", r.micro_batch);
  if (r.peer >= 0 && r.kind != RecordKind::action)
    what += fmt::format(" {} {}", peer_is_node(r.kind) ? "node" : "peer stage", r.peer);
  return fmt::format("{:>12.3f} ms  {:<11} {}step {} round {}: {} (id {:#x}, cause {:#x})",
                     static_cast<double>(r.start_ns - t0_ns) / 1e6, who, r.phase ? "eval " : "",
                     r.step, r.round, what, r.id, r.cause);
}

std::string HangDiagnosis::text() const {
  std::string out = fmt::format("watchdog: no progress for {:.1f} s; wait-for graph:\n", timeout_s);
  for (const auto& l : graph.lines) out += "  " + l + "\n";
  out += "watchdog: " + graph.verdict + "\n";
  if (!last_records.empty()) {
    const std::int64_t t0 = last_records.front().start_ns;
    out += fmt::format("watchdog: last {} trace records:\n", last_records.size());
    for (const auto& r : last_records) out += "  " + describe_record(r, t0) + "\n";
  }
  return out;
}

Watchdog::Watchdog(std::shared_ptr<ProgressBoard> board, WaitForContext context,
                   double timeout_s, std::shared_ptr<TraceSession> trace, OnFire on_fire,
                   std::function<void()> on_stuck, double grace_s)
    : board_(std::move(board)),
      context_(std::move(context)),
      timeout_ns_(static_cast<std::int64_t>(timeout_s * 1e9)),
      trace_(std::move(trace)),
      on_fire_(std::move(on_fire)),
      on_stuck_(std::move(on_stuck)),
      grace_s_(grace_s),
      started_ns_(now_ns()),
      thread_([this] { loop(); }) {}

void Watchdog::on_pause(std::function<void(double)> report) {
  std::lock_guard lock(mutex_);
  on_pause_ = std::move(report);
}

int Watchdog::pauses() const {
  std::lock_guard lock(mutex_);
  return pauses_;
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool Watchdog::overdue(const std::vector<StageSnapshot>& stages, std::int64_t now) const {
  for (const auto& s : stages) {
    const std::int64_t since = std::max(s.since_ns, started_ns_);  // 0: never published
    if (now - since > timeout_ns_) return true;
  }
  return false;
}

void Watchdog::loop() {
  // Poll often enough that the diagnosis comes within a tenth of the timeout.
  const auto period = std::chrono::nanoseconds(std::clamp<std::int64_t>(timeout_ns_ / 10, 1'000'000, 200'000'000));
  // A tick that comes much later than asked means this process did not run in between
  // (SIGSTOP, a suspended VM, a machine starved of CPU): its stages did not either, so
  // nothing overdue by then is a hang. The deadlines count again from the tick.
  const std::int64_t frozen_ns = period.count() + kFrozenAfterNs;
  std::int64_t last_tick = now_ns();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period);
    if (stopping_) return;
    const std::int64_t now = now_ns();
    const std::int64_t gap = now - std::exchange(last_tick, now);
    if (gap > frozen_ns) {
      started_ns_ = now;
      ++pauses_;
      lock.unlock();
      if (on_pause_) on_pause_(static_cast<double>(gap) / 1e9);
      lock.lock();
      continue;
    }
    if (paused_) continue;
    const auto stages = board_->snapshot();
    if (!overdue(stages, now)) continue;
    HangDiagnosis d;
    d.timeout_s = static_cast<double>(timeout_ns_) / 1e9;
    d.graph = build_wait_for_graph(stages, context_, now);
    if (trace_) d.last_records = trace_->recent(8);
    fired_ = true;
    rearmed_ = false;
    lock.unlock();
    on_fire_(d);
    lock.lock();
    const bool answered = wake_.wait_for(lock, std::chrono::duration<double>(grace_s_),
                                         [this] { return stopping_ || rearmed_; });
    if (stopping_) return;
    if (answered) {  // recovered: deadlines start again now
      started_ns_ = last_tick = now_ns();
      fired_ = false;
      continue;
    }
    if (on_stuck_) on_stuck_();
    return;
  }
}

void Watchdog::rearm() {
  {
    std::lock_guard lock(mutex_);
    rearmed_ = true;
    if (paused_) {  // deadlines count from the end of the wait
      paused_ = false;
      started_ns_ = now_ns();
    }
  }
  wake_.notify_all();
}

void Watchdog::pause() {
  std::lock_guard lock(mutex_);
  paused_ = true;
}

}  // namespace conveyor::trace
