// Recovery of a run from a failed, hung or non-finite step (coordinator_flow.hpp):
//   detection → (budget check) → replace dead or hung stage actors → every stage aborts the
//   round and loads snapshot S (the newest all hold) → replay from S.
// What must hold: after a recovery every stage holds exactly the state after S steps, no
// message or reply of an aborted round is acted on (round fences in the stages, the
// generation here), and a replayed step computes what it would have without the fault
// (the data of a step depends only on the seed and the step).
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/error_text.hpp"
#include "actors/fault/recovery_messages.hpp"

namespace conveyor::coordinator_flow {
namespace {

using Clock = std::chrono::steady_clock;

bool recoverable(const CoordinatorState& st, const Failure& f) {
  if (!st.job->snapshots || !st.budget) return false;
  if (f.fault != "nan" && st.job->recovery.policy != FaultPolicy::restart) return false;
  return f.respawn.empty() || static_cast<bool>(st.restarts.respawn);
}

// Beyond fault.max_restarts within fault.window_s: a checkpoint of the newest state every
// stage holds (when the run checkpoints), then the run stops with the reason.
void give_up(Self* self, const Failure& f) {
  auto& st = self->state;
  std::string why = fmt::format(
      "{}; {} recoveries within fault.window_s ({} s) already, the most fault.max_restarts "
      "allows: giving up",
      f.reason, st.budget->max_restarts(), st.budget->window_s());
  const auto step = st.job->snapshots->consistent_step();
  if (st.checkpoints && step)
    if (auto held = st.job->snapshots->shards(*step)) {
      try {
        st.checkpoints->take(*step, std::move(held->first), held->second, /*stop=*/true);
        why += fmt::format("; a checkpoint after step {} was written (resume with --resume latest)",
                           *step);
      } catch (const std::exception& e) {
        why += fmt::format("; writing the checkpoint after step {} failed too: {}", *step, e.what());
      }
    }
  fail(self, why);
}

void finish_recovery(Self* self, const Failure& f, std::int64_t failed_step,
                     std::int64_t restored, Clock::time_point detected) {
  auto& st = self->state;
  st.recovering = false;
  st.job->snapshots->discard_after(restored);  // the replay puts them again
  const auto now = Clock::now();
  RecoveryEvent e;
  e.fault = f.fault;
  e.stages = f.stages;
  e.step = failed_step;
  e.restored_step = restored;
  e.respawned = f.respawn;
  e.recovery_ms = std::chrono::duration<double, std::milli>(now - detected).count();
  e.restarts_in_window = st.budget->used(now);
  e.reason = f.reason;
  st.observer->on_recovery(e);
  if (st.restarts.recovered) st.restarts.recovered();
  resume_at_boundary(self, restored);
}

}  // namespace

bool try_recover(Self* self, Failure f) {
  auto& st = self->state;
  if (!recoverable(st, f)) return false;
  const auto detected = Clock::now();
  const auto restored = st.job->snapshots->consistent_step();
  if (!restored) return false;
  if (!st.budget->admit(detected)) {
    give_up(self, f);
    return true;
  }
  ++st.generation;
  st.recovering = true;
  st.reports.clear();
  for (int r : f.respawn) {
    auto& old = st.stages.at(static_cast<std::size_t>(r));
    self->demonitor(old);
    self->send_exit(old, caf::exit_reason::kill);  // a hung one; a dead one ignores it
    old = st.restarts.respawn(r, st.round);
    self->monitor(old);
  }
  const PeerTable table{st.stages};
  for (auto& s : st.stages) self->send(s, table);
  const auto failure = std::make_shared<const Failure>(std::move(f));
  const auto failed_step = st.step;
  const auto generation = st.generation;
  auto pending = std::make_shared<std::size_t>(st.stages.size());
  for (std::size_t r = 0; r < st.stages.size(); ++r)
    self->request(st.stages[r], caf::infinite, RestoreStage{*restored, st.round})
        .then(
            [=](const StageRestored&) {
              if (self->state.generation != generation || --*pending > 0) return;
              finish_recovery(self, *failure, failed_step, *restored, detected);
            },
            [=](caf::error& e) {
              if (self->state.generation != generation) return;
              fail(self, fmt::format("{}; recovering from it failed: restoring stage {} to step {}: {}",
                                     failure->reason, r, *restored, error_text(self->system(), e)));
            });
  return true;
}

void take_first_snapshot(Self* self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.job->snapshots) {
    then();
    return;
  }
  auto pending = std::make_shared<std::size_t>(st.stages.size());
  auto next = std::make_shared<std::function<void()>>(std::move(then));
  for (std::size_t r = 0; r < st.stages.size(); ++r)
    self->request(st.stages[r], caf::infinite, TakeSnapshot{st.step})
        .then(
            [=](const SnapshotTaken&) {
              if (--*pending == 0) (*next)();
            },
            [=](caf::error& e) {
              fail(self, fmt::format("stage {}: taking its first in-memory snapshot (for "
                                     "fault.policy restart / fault.on_nan rollback): {}",
                                     r, error_text(self->system(), e)));
            });
}

}  // namespace conveyor::coordinator_flow
