#include "actors/coordinator/coordinator_actor.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actors/coordinator/step_accounting.hpp"
#include "actors/error_text.hpp"
#include "actors/stage/stage_snapshot.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {
namespace {

using Self = caf::stateful_actor<CoordinatorState>;

void start_round(Self* self, Phase phase) {
  auto& st = self->state;
  st.phase = phase;
  ++st.round;
  st.reports.clear();
  st.step_start = std::chrono::steady_clock::now();
  const auto& plans = phase == Phase::train ? st.train_plans : st.eval_plans;
  st.probe.round_started(st.round, st.step, phase);
  for (std::size_t r = 0; r < st.stages.size(); ++r) {
    StepPlan plan{st.round, st.step, phase, plans[r]};
    st.probe.plan_sending(plan, static_cast<int>(r));
    self->send(st.stages[r], std::move(plan));
  }
}

void fail(Self* self, const std::string& why) {
  auto& st = self->state;
  if (st.done.pending()) st.done.deliver(failure(why));
  for (auto& s : st.stages) self->send_exit(s, caf::exit_reason::user_shutdown);
  self->quit(failure(why));
}

void gather_weights(Self* self) {
  auto& st = self->state;
  st.finishing = true;
  for (auto& stage : st.stages)
    self->request(stage, caf::infinite, weights_atom::value)
        .then(
            [=](WeightsReply& reply) {
              auto& st = self->state;
              st.weights.push_back(std::move(reply));
              if (st.weights.size() < st.stages.size()) return;
              std::vector<const ModelStageWeights*> all;
              for (const auto& w : st.weights)
                for (const auto& m : w.model_stages) all.push_back(&m);
              std::sort(all.begin(), all.end(),
                        [](auto* a, auto* b) { return a->model_stage < b->model_stage; });
              TrainResult result;
              for (const auto* m : all)
                result.weights.insert(result.weights.end(), m->tensors.begin(), m->tensors.end());
              result.final_loss = st.last_step.loss;
              result.final_val_loss = st.last_eval.val_loss;
              st.done.deliver(std::move(result));
              for (auto& s : st.stages) self->send_exit(s, caf::exit_reason::user_shutdown);
              self->quit();
            },
            [=](caf::error& e) { fail(self, "gathering weights: " + error_text(self->system(), e)); });
}

bool eval_due(const TrainingJob& job, std::int64_t step) {
  const bool last = step + 1 == job.steps;
  return last || (job.eval_every > 0 && (step + 1) % job.eval_every == 0);
}

void next_after_step(Self* self) {
  auto& st = self->state;
  if (eval_due(*st.job, st.step)) {
    start_round(self, Phase::eval);
    return;
  }
  ++st.step;
  start_round(self, Phase::train);
}

// A preemption stop: the checkpoint is written, the run ends without its final weights.
void finish_stopped(Self* self) {
  auto& st = self->state;
  st.finishing = true;
  TrainResult result;
  result.final_loss = st.last_step.loss;
  result.final_val_loss = st.last_eval.val_loss;
  st.done.deliver(std::move(result));
  for (auto& s : st.stages) self->send_exit(s, caf::exit_reason::user_shutdown);
  self->quit();
}

// Every stage's state after `steps_done` steps, to the hook; then the run goes on (or stops).
void capture_state(Self* self, std::int64_t steps_done, bool stop) {
  auto& st = self->state;
  const std::size_t n = st.stages.size();
  auto shards = std::make_shared<std::vector<checkpoint::StageShard>>(n);
  auto pending = std::make_shared<std::size_t>(n);
  for (std::size_t r = 0; r < n; ++r)
    self->request(st.stages[r], caf::infinite, snapshot_atom::value)
        .then(
            [=](StageSnapshot& snap) {
              auto& st = self->state;
              auto& shard = shards->at(static_cast<std::size_t>(snap.rank));
              shard.stage = snap.rank;
              shard.tensors = std::move(snap.tensors);
              if (--*pending > 0) return;
              try {
                st.checkpoints->take(steps_done, std::move(*shards), stop);
              } catch (const std::exception& e) {
                fail(self, fmt::format("checkpoint after step {}: {}", steps_done, e.what()));
                return;
              }
              if (stop)
                finish_stopped(self);
              else
                next_after_step(self);
            },
            [=](caf::error& e) {
              fail(self, fmt::format("checkpoint after step {}: {}", steps_done,
                                     error_text(self->system(), e)));
            });
}

void after_step(Self* self) {
  auto& st = self->state;
  BoundaryDecision decision;
  try {
    if (st.checkpoints) decision = st.checkpoints->at_boundary(st.step + 1);
  } catch (const std::exception& e) {
    fail(self, fmt::format("checkpoint after step {}: {}", st.step + 1, e.what()));
    return;
  }
  if (decision.snapshot || decision.stop)
    capture_state(self, st.step + 1, decision.stop);
  else
    next_after_step(self);
}

void finish_eval(Self* self) {
  auto& st = self->state;
  st.last_eval = EvalMetrics{st.step, mean_loss(st.reports, st.job->eval_batches)};
  st.observer->on_eval(st.last_eval);
  if (st.step + 1 == st.job->steps) {
    gather_weights(self);
    return;
  }
  ++st.step;
  start_round(self, Phase::train);
}

void finish_train_compute(Self* self) {
  auto& st = self->state;
  const auto& job = *st.job;
  const double norm = global_grad_norm(st.reports);
  const float scale = clip_scale(norm, job.grad_clip);
  const double lr = job.lr.at(st.step);
  st.last_step = StepMetrics{};
  st.last_step.step = st.step;
  st.last_step.loss = mean_loss(st.reports, job.data.micro_batches);
  st.last_step.lr = lr;
  st.last_step.grad_norm = norm;
  if (!std::isfinite(st.last_step.loss) || !std::isfinite(norm)) {
    st.last_step.nonfinite_ranks = nonfinite_ranks(st.reports);
    const auto where = fmt::format(
        "step {}: the loss ({}) or the gradient norm ({}) is not finite; non-finite on stage(s) {}",
        st.step, st.last_step.loss, norm, fmt::join(st.last_step.nonfinite_ranks, ", "));
    if (job.on_nan == NanPolicy::abort) {
      fail(self, where + " (fault.on_nan: abort; skip drops such a step's update instead)");
      return;
    }
    st.last_step.skipped = true;
  }
  auto pending = std::make_shared<std::size_t>(st.stages.size());
  for (std::size_t r = 0; r < st.stages.size(); ++r) {
    OptimizerStep step{st.step, lr, scale};
    step.skip = st.last_step.skipped;
    st.probe.optimizer_sending(step, static_cast<int>(r));
    self->request(st.stages[r], caf::infinite, step)
        .then(
            [=](const OptimizerDone& done) {
              auto& st = self->state;
              st.probe.done_received(done);
              if (--*pending > 0) return;
              const auto elapsed = std::chrono::steady_clock::now() - st.step_start;
              st.last_step.step_ms = std::chrono::duration<double, std::milli>(elapsed).count();
              st.last_step.tokens_per_s =
                  st.job->tokens_per_step() / (st.last_step.step_ms / 1e3);
              auto bubble = measure_bubble(st.reports, static_cast<int>(st.stages.size()));
              st.last_step.bubble = bubble.bubble;
              st.last_step.stage_busy_ms = bubble.busy_ms;
              st.observer->on_step(st.last_step, st.reports);
              after_step(self);
            },
            [=](caf::error& e) { fail(self, "optimizer step: " + error_text(self->system(), e)); });
  }
}

}  // namespace

caf::behavior coordinator_actor(Self* self, std::shared_ptr<const TrainingJob> job,
                                std::vector<caf::actor> stages, TrainingObserver* observer) {
  auto& st = self->state;
  st.job = job;
  st.observer = observer;
  st.checkpoints = job->checkpoints;
  if (st.checkpoints) st.step = st.checkpoints->first_step();
  st.stages = stages;
  st.probe = trace::CoordinatorProbe(job->trace ? &job->trace->coordinator() : nullptr);
  for (std::size_t r = 0; r < stages.size(); ++r) {
    st.train_plans.push_back(
        std::make_shared<const std::vector<sched::Action>>(job->schedule.ranks.at(r)));
    st.eval_plans.push_back(std::make_shared<const std::vector<sched::Action>>(
        eval_actions(job->placement.ranks.at(r), job->eval_batches)));
  }
  for (auto& s : stages) {
    self->monitor(s);
    self->send(s, PeerTable{stages});
  }
  self->set_down_handler([=](caf::down_msg& down) {
    auto& st = self->state;
    if (st.finishing && !down.reason) return;
    int rank = -1;
    for (std::size_t r = 0; r < st.stages.size(); ++r)
      if (st.stages[r].address() == down.source) rank = static_cast<int>(r);
    fail(self, fmt::format("stage {} failed: {}", rank, error_text(self->system(), down.reason)));
  });
  return {
      [=](train_atom) -> caf::result<TrainResult> {
        auto& st = self->state;
        st.done = self->make_response_promise();
        start_round(self, Phase::train);
        return st.done;
      },
      [=](stop_run_atom, const std::string& why) { fail(self, why); },
      [=](StageReport& report) {
        auto& st = self->state;
        st.probe.report_received(report);
        if (report.step != st.step || report.phase != st.phase) {
          fail(self, fmt::format("stage {} reported {} step {} during {} step {}", report.rank,
                                 phase_name(report.phase), report.step, phase_name(st.phase),
                                 st.step));
          return;
        }
        st.reports.push_back(std::move(report));
        if (st.reports.size() < st.stages.size()) return;
        try {
          if (st.phase == Phase::train)
            finish_train_compute(self);
          else
            finish_eval(self);
        } catch (const std::exception& e) {
          fail(self, e.what());
        }
      },
  };
}

}  // namespace conveyor
