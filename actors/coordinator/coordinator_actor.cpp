#include "actors/coordinator/coordinator_actor.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actors/checkpoint/sharded_state.hpp"
#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/job_failure.hpp"
#include "actors/coordinator/replica_weights.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/coordinator/stage_end_text.hpp"
#include "actors/coordinator/step_accounting.hpp"
#include "actors/plan/eval_plan.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/messages/replica_recovery_messages.hpp"
#include "actors/messages/stage_snapshot.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {
namespace coordinator_flow {

namespace {

// The plans of the evaluation's wave that starts at micro-batch `first`: replica 0 alone
// evaluates (the others get an empty list), so the val loss is the one of a run without
// replicas.
std::vector<std::shared_ptr<const std::vector<sched::Action>>> eval_wave_plans(
    const Job& job, int first) {
  const int count = std::min(job.plan.eval_wave(), job.plan.eval_batches - first);
  const auto layout = job.plan.replica_layout();
  std::vector<std::shared_ptr<const std::vector<sched::Action>>> plans;
  for (int a = 0; a < layout.actors(); ++a)
    plans.push_back(std::make_shared<const std::vector<sched::Action>>(
        layout.replica_of(a) == 0
            ? eval_actions(job.plan.placement.ranks.at(static_cast<std::size_t>(layout.stage_of(a))),
                           first, count)
            : std::vector<sched::Action>{}));
  return plans;
}

}  // namespace

std::vector<std::shared_ptr<const std::vector<sched::Action>>> train_plans_of(const JobPlan& plan) {
  std::vector<std::shared_ptr<const std::vector<sched::Action>>> plans;
  const auto layout = plan.replica_layout();
  for (int r = 0; r < plan.stage_actors(); ++r) {
    const auto s = static_cast<std::size_t>(layout.stage_of(r));
    plans.push_back(std::make_shared<const std::vector<sched::Action>>(
        plan.schedule_of(layout.replica_of(r)).ranks.at(s)));
  }
  return plans;
}

void start_round(Self* self, Phase phase) {
  auto& st = self->state;
  st.phase = phase;
  ++st.round;
  st.reports.clear();
  st.step_start = std::chrono::steady_clock::now();
  st.boundary = phase == Phase::train ? st.step : st.step + 1;
  const auto plans = phase == Phase::train ? st.train_plans : eval_wave_plans(*st.job, st.eval_first);
  st.probe.round_started(st.round, st.step, phase);
  for (std::size_t r = 0; r < st.stages.size(); ++r) {
    StepPlan plan{st.round, st.step, phase, plans[r]};
    st.probe.plan_sending(plan, static_cast<int>(r));
    self->send(st.stages[r], std::move(plan));
  }
}

std::string stage_text(Self* self, const caf::error& e, int rank) {
  return stage_end_text(self->system(), e, rank, self->state.restarts.node_of_rank);
}

void fail(Self* self, const std::string& why) {
  auto& st = self->state;
  if (st.done.pending()) st.done.deliver(failure(why));
  for (auto& s : st.stages) self->send_exit(s, job_failed(why));
  end_joined(self, job_failed(why));
  self->quit(failure(why));
}

}  // namespace coordinator_flow

namespace {

using namespace coordinator_flow;

// Stages in other processes hand their tensors over the channels, not CAF: their final
// weights reach the coordinator as placeholders (actors/messages/pending_payload.hpp), and
// checkpoints come from node 0's snapshot store (its own stages' snapshots and the copies
// of the others', actors/cluster/snapshot_keeper.hpp) or from stages of node 0.
bool spans_processes(const CoordinatorState& st) {
  for (int n : st.restarts.node_of_rank)
    if (n != 0) return true;
  return false;
}

// The run ended while nodes that joined waited for a boundary fault.grow allows (at_checkpoint
// with no checkpoint left to take): they end in order, told why.
void end_joined_at_the_end(Self* self) {
  auto& st = self->state;
  for (const auto& [node, j] : st.joined)
    fmt::print(stderr, "conveyor train: node {} joined, but the run ended before a boundary fault.grow allows\n",
               node);
  end_joined(self, caf::exit_reason::user_shutdown);
}

void gather_weights(Self* self) {
  auto& st = self->state;
  st.enter(CoordinatorPhase::finishing);
  gather<WeightsReply>(
      self, first_ranks(st.stages.size()),
      asking_stages(self, weights_atom::value),
      {.all =
           [=](std::map<int, WeightsReply>& replies) {
             auto& st = self->state;
             std::vector<WeightsReply> weights;
             for (auto& [rank, reply] : replies) weights.push_back(std::move(reply));
             TrainResult result;
             auto models = weights_by_replica(weights, st.job->plan.replica_layout());
             if (st.job->plan.replicas > 1) {
               // Across processes the bytes are compared once fetched (actors/runtime/run_job.cpp).
               if (auto diff = spans_processes(st) ? std::nullopt : replica_difference(models)) {
                 fail(self, "data-parallel replicas ended with different weights: " + *diff);
                 return;
               }
               result.replica_weights = models;
             }
             result.weights = std::move(models.front());
             result.final_loss = st.last_step.loss;
             if (st.last_eval) result.final_val_loss = st.last_eval->val_loss;
             result.final_eval_dropped = st.final_eval_dropped;
             st.done.deliver(std::move(result));
             for (auto& s : st.stages) self->send_exit(s, caf::exit_reason::user_shutdown);
             end_joined_at_the_end(self);
             self->quit();
           },
       .failed =
           [=](int r, caf::error& e) {
             fail(self, fmt::format("gathering weights: stage {}: {}", r, stage_text(self, e, r)));
           }});
}

bool eval_due(const Job& job, std::int64_t step) {
  const bool last = step + 1 == job.plan.steps;
  return last || (job.plan.eval_every > 0 && (step + 1) % job.plan.eval_every == 0);
}

// `checkpointed`: a checkpoint was taken at this boundary (fault.grow at_checkpoint).
void next_after_step(Self* self, bool checkpointed) {
  auto& st = self->state;
  if (grow_due(st, checkpointed)) {
    grow_at_boundary(self, st.step + 1);
    return;
  }
  if (eval_due(*st.job, st.step)) {
    start_eval(self);
    return;
  }
  ++st.step;
  start_round(self, Phase::train);
}

// A preemption stop: the checkpoint is written, the run ends without its final weights.
void finish_stopped(Self* self) {
  auto& st = self->state;
  st.enter(CoordinatorPhase::finishing);
  TrainResult result;
  result.final_loss = st.last_step.loss;
  if (st.last_eval) result.final_val_loss = st.last_eval->val_loss;
  st.done.deliver(std::move(result));
  for (auto& s : st.stages) self->send_exit(s, caf::exit_reason::user_shutdown);
  end_joined_at_the_end(self);
  self->quit();
}

// Hands every stage's state after `steps_done` steps to the hook; then the run goes on
// (or stops).
void hand_over(Self* self, std::int64_t steps_done, std::vector<checkpoint::StageShard> shards,
               std::int64_t optimizer_steps, bool stop) {
  try {
    self->state.handed_over = steps_done;
    self->state.checkpoints->take(steps_done, std::move(shards), optimizer_steps, stop);
  } catch (const std::exception& e) {
    fail(self, fmt::format("checkpoint after step {}: {}", steps_done, e.what()));
    return;
  }
  if (stop)
    finish_stopped(self);
  else
    next_after_step(self, /*checkpointed=*/true);
}

constexpr auto kCopyPoll = std::chrono::milliseconds(1);

// Every stage's state after `steps_done` steps, to the hook: from the in-memory snapshots
// when every stage holds that step (across processes: once the copies arrived, polled
// every kCopyPoll, asked for first without buddy copies), else asked of the stages.
void capture_state(Self* self, std::int64_t steps_done, bool stop, int polls = 0) {
  auto& st = self->state;
  const bool nodes_write = spans_processes(st) && remote_shards_written_by_nodes(st);
  if (nodes_write && stop && st.handed_over == steps_done) {
    // A stop during the evaluation after this boundary's checkpoint: the hook makes that
    // one durable; the other nodes are not asked to write their shards a second time.
    hand_over(self, steps_done, {}, 0, stop);
    return;
  }
  if (nodes_write)
    if (auto held = shards_written_by_nodes(self, steps_done)) {
      hand_over(self, steps_done, std::move(held->first), held->second, stop);
      return;
    }
  if (st.job->services.snapshots && !nodes_write)
    if (auto held = snapshot_shards(st, steps_done)) {
      hand_over(self, steps_done, std::move(held->first), held->second, stop);
      return;
    }
  if (st.job->services.snapshots && spans_processes(st)) {
    if (polls == 0 && st.restarts.remote_markers && !nodes_write)
      ask_for_copies(self, steps_done, fmt::format("checkpoint after step {}", steps_done));
    const auto copy_wait = st.restarts.copy_wait;
    if (polls * kCopyPoll < copy_wait) {
      self->delayed_send(self, kCopyPoll, capture_retry_atom::value, steps_done, stop, polls + 1,
                         st.generation);
      return;
    }
    fail(self, fmt::format("checkpoint after step {}: node 0 did not receive every other "
                           "node's snapshot {} of that step within {} s",
                           steps_done, nodes_write ? "note" : "copy", std::chrono::duration<double>(copy_wait).count()));
    return;
  }
  // Replica 0's stages (actors 0 … P−1): replicas are identical, a checkpoint holds one copy.
  // With sharded optimizer state every actor holds a part of its stage's moments: all R·P
  // are asked, and each stage's parts merged.
  const bool sharded = st.job->plan.shards_optimizer_state();
  const std::size_t n = sharded ? st.stages.size() : st.job->plan.placement.ranks.size();
  gather<StageSnapshot>(
      self, first_ranks(n),
      asking_stages(self, snapshot_atom::value),
      {.all =
           [=](std::map<int, StageSnapshot>& snaps) {
             std::vector<checkpoint::StageShard> shards(n);
             for (auto& [r, snap] : snaps) {
               auto& shard = shards.at(static_cast<std::size_t>(snap.rank));
               shard.stage = snap.rank;
               shard.tensors = std::move(snap.tensors);
             }
             // Every stage has taken the same optimizer steps.
             const std::int64_t optimizer_steps = snaps.begin()->second.optimizer_steps;
             if (sharded)
               shards = checkpoint::merge_sharded_replicas(std::move(shards),
                                                           self->state.job->plan.replicas);
             hand_over(self, steps_done, std::move(shards), optimizer_steps, stop);
           },
       .failed =
           [=](int r, caf::error& e) {
             // A stage that died here is recovered through its down message.
             if (self->state.budget) return;
             fail(self, fmt::format("checkpoint after step {}: stage {}: {}", steps_done, r,
                                    stage_text(self, e, r)));
           }});
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
  if (decision.snapshot)
    capture_state(self, st.step + 1, decision.stop);
  else if (decision.stop)  // a job that cannot checkpoint (across processes): no state
    finish_stopped(self);
  else
    next_after_step(self, /*checkpointed=*/false);
}

void finish_eval(Self* self) {
  auto& st = self->state;
  st.last_eval = EvalMetrics{st.step, mean_loss(st.eval_reports, st.job->plan.eval_batches)};
  st.eval_reports.clear();
  st.evaluated_through = st.step;
  st.observer->on_eval(*st.last_eval);
  if (st.step + 1 == st.job->plan.steps) {
    gather_weights(self);
    return;
  }
  ++st.step;
  start_round(self, Phase::train);
}

// A wave of the evaluation after step st.step has reported: the next wave, unless the
// hook asks the run to stop (a preemption notice that came after at_boundary). Then the
// evaluation is dropped and the run stops at the boundary before it, as at_boundary's stop
// would have; after the last step, it writes its weights without that evaluation.
void finish_eval_wave(Self* self) {
  auto& st = self->state;
  for (auto& r : st.reports) st.eval_reports.push_back(std::move(r));
  st.eval_first += st.job->plan.eval_wave();
  if (st.eval_first >= st.job->plan.eval_batches) {
    finish_eval(self);
    return;
  }
  const std::int64_t steps_done = st.step + 1;
  bool stop = false;
  try {
    stop = st.checkpoints && st.checkpoints->stop_during_eval(steps_done);
  } catch (const std::exception& e) {
    fail(self, fmt::format("checkpoint after step {}: {}", steps_done, e.what()));
    return;
  }
  if (!stop) {
    start_round(self, Phase::eval);
  } else if (steps_done == st.job->plan.steps) {
    st.final_eval_dropped = true;
    gather_weights(self);
  } else {
    capture_state(self, steps_done, /*stop=*/true);
  }
}

// Every stage took step st.step: its metrics, then the boundary after it.
void on_optimizer_done(Self* self) {
  auto& st = self->state;
  st.boundary = st.step + 1;
  const auto elapsed = std::chrono::steady_clock::now() - st.step_start;
  st.last_step.step_ms = std::chrono::duration<double, std::milli>(elapsed).count();
  st.last_step.tokens_per_s = st.job->plan.tokens_per_step() / (st.last_step.step_ms / 1e3);
  auto bubble = measure_bubble(st.reports, static_cast<int>(st.stages.size()));
  st.last_step.bubble = bubble.bubble;
  st.last_step.stage_busy_ms = bubble.busy_ms;
  if (st.job->plan.replicas > 1) {
    const ReductionCost cost = reduction_cost(st.reports);
    st.last_step.allreduce_ms = cost.busy_ms;
    st.last_step.allreduce_exposed_ms = cost.exposed_ms;
  }
  st.observer->on_step(st.last_step, st.reports);
  after_step(self);
}

void finish_train_compute(Self* self) {
  auto& st = self->state;
  const auto& job = *st.job;
  // With replicas every replica's stage reports the squares of the same averaged gradients:
  // replica 0's alone are the model's.
  const double norm = global_grad_norm(st.reports, job.plan.replica_layout());
  const float scale = clip_scale(norm, job.plan.grad_clip);
  const double lr = job.plan.lr.at(st.step);
  st.last_step = StepMetrics{};
  st.last_step.step = st.step;
  st.last_step.loss = mean_loss(st.reports, job.plan.data.micro_batches);
  st.last_step.lr = lr;
  st.last_step.grad_norm = norm;
  if (!std::isfinite(st.last_step.loss) || !std::isfinite(norm)) {
    st.last_step.nonfinite_ranks = nonfinite_ranks(st.reports);
    const auto params = nonfinite_params(st.reports, job.plan.model, job.plan.placement);
    const auto where = fmt::format(
        // Steps count from 0 as in metrics.jsonl and fault.inject; progress lines from 1.
        "step {} (counted from 0; the progress line's step {}): the loss ({}) or the gradient "
        "norm ({}) is not finite; non-finite on stage(s) {}{}",
        st.step, st.step + 1, st.last_step.loss, norm, fmt::join(st.last_step.nonfinite_ranks, ", "),
        params.empty() ? std::string()
                       : fmt::format(" ({} parameter gradient(s), the deepest {}: where backward "
                                     "first met it)",
                                     params.size(), params.back()));
    if (job.plan.on_nan == NanPolicy::abort) {
      fail(self, where + " (fault.on_nan: abort; skip drops such a step's update instead)");
      return;
    }
    if (job.plan.on_nan == NanPolicy::rollback) {
      if (st.rolled_back_step == st.step) {
        fail(self, where + " again after a rollback: not a transient fault (fault.on_nan: rollback)");
        return;
      }
      st.rolled_back_step = st.step;
      Failure nan{"nan", st.last_step.nonfinite_ranks, {}, where};
      if (!try_recover(self, std::move(nan)))
        fail(self, where + " (fault.on_nan: rollback, but no snapshot to roll back to)");
      return;
    }
    st.last_step.skipped = true;
  }
  st.boundary.reset();  // from here some stages may have stepped and some not
  gather<OptimizerDone>(
      self, first_ranks(st.stages.size()),
      [=](int r) {
        auto& st = self->state;
        OptimizerStep step{st.step, lr, scale};
        step.skip = st.last_step.skipped;
        st.probe.optimizer_sending(step, r);
        return self->request(st.stages[static_cast<std::size_t>(r)], caf::infinite, step);
      },
      {.all = [=](std::map<int, OptimizerDone>&) { on_optimizer_done(self); },
       .failed =
           [=](int r, caf::error& e) {
             // A stage that died here is recovered through its down message.
             if (self->state.budget) return;
             fail(self, fmt::format("optimizer step: stage {}: {}", r, stage_text(self, e, r)));
           },
       .each =
           [=](int, OptimizerDone& done) {
             auto& st = self->state;
             st.probe.done_received(done);
             st.last_step.allgather_ms += done.allgather_ms / static_cast<double>(st.stages.size());
             note_remote_snapshot(st, done.rank, done.step + 1);
           }});
}

}  // namespace

namespace coordinator_flow {

void start_eval(Self* self) {
  auto& st = self->state;
  st.eval_first = 0;
  st.eval_reports.clear();
  start_round(self, Phase::eval);
}

void resume_at_boundary(Self* self, std::int64_t steps_done) {
  auto& st = self->state;
  st.reports.clear();
  if (steps_done > 0 && eval_due(*st.job, steps_done - 1) && st.evaluated_through < steps_done - 1) {
    st.step = steps_done - 1;
    start_eval(self);
    return;
  }
  st.step = steps_done;
  start_round(self, Phase::train);
}

}  // namespace coordinator_flow

namespace {

using namespace coordinator_flow;

int rank_of(const CoordinatorState& st, const caf::actor_addr& who) {
  for (std::size_t r = 0; r < st.stages.size(); ++r)
    if (st.stages[r].address() == who) return static_cast<int>(r);
  return -1;
}

void on_stage_down(Self* self, const caf::down_msg& down) {
  auto& st = self->state;
  if (st.in(CoordinatorPhase::finishing) && !down.reason) return;
  const int rank = rank_of(st, down.source);
  if (rank < 0) return;  // a stage already replaced by a recovery
  const auto why = fmt::format("stage {} failed: {}", rank, stage_text(self, down.reason, rank));
  if (is_remote(st, rank) && down.reason == caf::exit_reason::remote_link_unreachable) {
    const int node = st.restarts.node_of_rank.at(static_cast<std::size_t>(rank));
    on_node_lost(self, node, fmt::format("stage {} failed: node {} became unreachable", rank, node));
    return;
  }
  if (st.in(CoordinatorPhase::recovering) && (!st.awaiting.empty() || st.respawning > 0) &&
      respawns_in_place(st, rank)) {
    // Its transfers to a lost node broke (a stage of this process, or of another surviving
    // one — its UCX endpoint to the lost node timed out): replaced within the recovery
    // under way, in its own process.
    st.recovery->failure.respawn.push_back(rank);
    replace_stage(self, rank, /*lost_why=*/nullptr);
    return;
  }
  if (st.in(CoordinatorPhase::running) &&
      try_recover(self, Failure{"crash", {rank}, {rank}, why}))
    return;
  // With replicas a stage may die while a recovery is under way: after its group failed
  // its replicas (they reported that first), or during the restore. A stage of another
  // node whose process lives on (a lost link is a node's loss, above) is respawned there
  // (RespawnStage), as this process's are here.
  if (st.in(CoordinatorPhase::recovering) && st.job->plan.replicas > 1 && respawns_in_place(st, rank) &&
      join_recovery(self, Failure{"crash", {rank}, {rank}, why}))
    return;
  fail(self, why);
}

// The watchdog's verdict under fault.policy restart: the blamed stage is replaced (it may
// be stuck waiting for a message that will never come), every stage rolls back.
void on_hang(Self* self, int culprit, const std::string& verdict) {
  auto& st = self->state;
  if (st.in(CoordinatorPhase::finishing)) return;
  const auto why = "hang: " + verdict;
  if (st.in(CoordinatorPhase::recovering)) {
    // Waiting for a lost node's replacement is bounded by fault.rejoin_timeout_s, not by
    // the watchdog (a diagnosis made just before the wait began): it looks again from now.
    // Any other recovery that stalls this long (a restore never answered) is a hang of its
    // own.
    if (!st.awaiting.empty() && st.restarts.recovered) {
      st.restarts.recovered();
      return;
    }
    fail(self, why + " (during a recovery)");
    return;
  }
  std::vector<int> blamed;
  if (culprit >= 0 && culprit < static_cast<int>(st.stages.size())) blamed.push_back(culprit);
  if (!(st.in(CoordinatorPhase::running) && try_recover(self, Failure{"hang", blamed, blamed, why})))
    fail(self, why);
}

void on_report(Self* self, StageReport& report) {
  auto& st = self->state;
  // Of an aborted round.
  if (st.in(CoordinatorPhase::recovering) || report.round < st.round) return;
  st.probe.report_received(report);
  if (report.round != st.round || report.step != st.step || report.phase != st.phase) {
    fail(self, fmt::format("stage {} reported {} step {} (round {}) during {} step {} (round {})",
                           report.rank, phase_name(report.phase), report.step, report.round,
                           phase_name(st.phase), st.step, st.round));
    return;
  }
  st.reports.push_back(std::move(report));
  if (st.reports.size() < st.stages.size()) return;
  try {
    if (st.phase == Phase::train)
      finish_train_compute(self);
    else
      finish_eval_wave(self);
  } catch (const std::exception& e) {
    fail(self, e.what());
  }
}

}  // namespace

CoordinatorActor::behavior_type coordinator_actor(Self* self, std::shared_ptr<const Job> job,
                                                  std::vector<StageActor> stages,
                                                  TrainingObserver* observer, StageRestarts restarts) {
  auto& st = self->state;
  st.job = job;
  st.started = job;
  st.started_nodes = restarts.node_of_rank;
  st.observer = observer;
  st.checkpoints = job->services.checkpoints;
  if (st.checkpoints) st.step = st.checkpoints->first_step();
  st.stages = stages;
  st.restarts = std::move(restarts);
  if (job->plan.recovers_in_place())
    st.budget.emplace(job->plan.recovery.max_restarts, job->plan.recovery.window_s);
  st.probe = trace::CoordinatorProbe(job->services.trace ? &job->services.trace->coordinator() : nullptr);
  st.train_plans = train_plans_of(job->plan);
  const PeerTable table = coordinator_flow::peer_table(st);
  for (auto& s : stages) {
    self->monitor(s);
    self->send(s, table);
  }
  self->set_down_handler([=](caf::down_msg& down) { on_stage_down(self, down); });
  // An exception out of a handler (the observer's metrics file on a full disk, a failed
  // synchronous checkpoint) fails the run with its message. CAF's default would end
  // this actor, print to stdout, and leave the stages waiting for plans that never come.
  self->set_exception_handler([=](caf::scheduled_actor*, std::exception_ptr& thrown) -> caf::error {
    std::string why = "the coordinator failed with an unknown exception";
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    fail(self, why);
    return failure(why);
  });
  return {
      [=](train_atom) -> caf::result<TrainResult> {
        auto& st = self->state;
        st.done = self->make_response_promise<TrainResult>();
        take_first_snapshot(self, [=] {
          self->state.enter(CoordinatorPhase::running);
          // A resumed run first runs the evaluation due after its checkpoint's step: a
          // stop there skipped or dropped it.
          resume_at_boundary(self, self->state.step);
        });
        return st.done;
      },
      [=](stop_run_atom, const std::string& why) { fail(self, why); },
      [=](node_lost_atom, int node, const std::string& why) { on_node_lost(self, node, why); },
      [=](capture_retry_atom, std::int64_t steps_done, bool stop, int polls, std::uint64_t generation) {
        if (is_current(self->state, generation) && !self->state.in(CoordinatorPhase::recovering))
          capture_state(self, steps_done, stop, polls);
      },
      [=](NodeStages& stages) { on_node_rejoined(self, stages); },
      [=](node_joined_atom, NodeStages& stages) { on_node_joined(self, stages); },
      [=](grow_retry_atom, std::int64_t steps_done, int polls, std::uint64_t generation) {
        if (is_current(self->state, generation) && self->state.in(CoordinatorPhase::running))
          grow_at_boundary(self, steps_done, polls);
      },
      [=](rejoin_deadline_atom, int node, std::uint64_t generation) {
        on_rejoin_deadline(self, node, generation);
      },
      [=](stage_hang_atom, int culprit, const std::string& verdict) { on_hang(self, culprit, verdict); },
      [=](StageReport& report) { on_report(self, report); },
      [=](const ReplicaGroupFailed& f) { on_group_failed(self, f.rank, f.round, f.what); },
  };
}

}  // namespace conveyor
