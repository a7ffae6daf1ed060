#include "actors/stage/stage_actor.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>

#include "actors/stage/own_shard_write.hpp"
#include "actors/stage/stage_remote.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/messages/replica_recovery_messages.hpp"
#include "actors/job/replica_groups.hpp"
#include "actors/worker/replica_gradients.hpp"
#include "actors/messages/stage_snapshot.hpp"
#include "actors/fault/fault_spec.hpp"
#include "actors/fault/restored_snapshot.hpp"
#include "transport/collective/collective_error.hpp"

namespace conveyor {
namespace {


// Runs what the worker can run now; routes its messages; reports a finished plan.
// fault.inject nan: a NaN in the message's first element, as a numerical blow-up upstream
// would leave it. Host tensors only (CPU stages).
void put_nan(Tensor& t) {
  if (!t.device().is_cpu())
    throw std::runtime_error("fault nan: injected into host tensors only (CPU stages), not " +
                             t.device().str());
  if (t.dtype() == DType::f32)
    t.f32()[0] = std::numeric_limits<float>::quiet_NaN();
  else
    static_cast<std::uint16_t*>(t.raw())[0] = 0x7FC0;  // bf16 quiet NaN
}

void drive_worker(StageSelf* self) {
  auto& st = self->state;
  std::vector<PipeMessage> to_self;
  auto outbox = [&](PipeMessage m) {
    const int dest = st.job->plan.actor_of_model_stage(st.worker->rank(), m.to_model_stage);
    if (st.job->services.fault && st.job->services.fault->poison(m, st.worker->rank())) put_nan(m.tensor);
    st.probe->sending(m, dest);
    if (dest == st.worker->rank()) {
      st.probe->received(m);
      st.worker->accept(std::move(m));
    } else if (st.links && st.links->crosses(dest)) {
      send_over_channel(self, dest, std::move(m));
    } else if (!st.job->services.fault || !st.job->services.fault->drop(m, st.worker->rank())) {
      self->send(st.peers.ranks.at(dest), std::move(m));
    }
  };
  st.worker->run_ready(outbox);
  if (st.worker->finished()) {
    auto report = st.worker->take_report();
    st.probe->report_sending(report);
    self->send(st.coordinator, std::move(report));
  }
}

// This stage's groups, as it joins them: generation 0 at the start, the coordinator's
// next one after each recovery (JoinReplicaGroup). Each join blocks until every rank of
// the group joined, each on a thread of its own; the stage group first, then the tied
// embedding's, on every stage alike (so no two stages wait for each other crosswise).
//  - its replicas' stage group (parallel.data > 1);
//  - model.tie_embeddings: a stage holding one copy joins its replica's group of two
//    (rank 0: the embedding's holder); one holding both sums in place, no group.
void join_groups(StageSelf* self, std::uint32_t generation) {
  auto& st = self->state;
  const auto& job = *st.job;
  const auto layout = job.plan.replica_layout();
  const int rank = st.worker->rank();
  if (job.plan.replicas > 1)
    st.worker->set_replica_group(job.services.replica_groups->join(
        layout.stage_of(rank), layout.replica_of(rank), st.worker->replica_bucket_layout(),
        job.plan.actor_placement(rank).device, generation, job.plan.replicas),
        job.plan.shards_optimizer_state());
  if (!job.plan.model.tie_embeddings || !st.worker->holds_tied_copy()) return;
  std::unique_ptr<GradientAllReduce> group;
  if (st.worker->tied_needs_group()) {
    const int first = job.plan.actor_of_model_stage(rank, 0);
    const int last = job.plan.actor_of_model_stage(rank, job.plan.placement.model_stages() - 1);
    const bool embedding = rank == first;
    group = job.services.replica_groups->join_tied(layout.replica_of(rank), embedding ? 0 : 1,
                                          st.worker->tied_bucket_layout(),
                                          job.plan.actor_placement(rank).device,
                                          job.plan.actor_placement(embedding ? last : first).device,
                                          generation);
  }
  st.worker->set_tied_embeddings(std::move(group));
}

// Leaves the groups before a recovery touches the gradients or the state: pending buckets
// settle first (a bucket may still be writing the gradients), and the groups'
// connections close, so a peer still waiting on this stage's part fails at once instead
// of after the group's timeout.
void leave_groups(StageSelf* self) {
  if (self->state.job->plan.replicas > 1) self->state.worker->set_replica_group(nullptr);
  self->state.worker->leave_tied_group();
}

// Drops the round under way (and every one up to `fence`): the stage group is left first,
// its buckets settled, since the abort zeroes the gradients they may still be writing.
void drop_round(StageSelf* self, std::int64_t fence) {
  auto& st = self->state;
  leave_groups(self);
  st.worker->abort(fence);
  st.probe->plan_aborted();
}

// A bucket of the stage group failed: a replica died, or left the group for a recovery.
// Not this stage's own failure: it drops the round (the buckets settled before the
// gradients are zeroed) and tells the coordinator, which recovers from it (or already
// does: then it ignores this) and rebuilds every group.
void abandon_round(StageSelf* self, const CollectiveError& e) {
  auto& st = self->state;
  drop_round(self, st.round);
  self->send(st.coordinator, ReplicaGroupFailed{st.worker->rank(), st.round, e.what()});
}

void drive(StageSelf* self) {
  try {
    drive_worker(self);
  } catch (const CollectiveError& e) {
    abandon_round(self, e);
  }
}

// The stage's state after `steps_done` steps into the process's snapshot store, and (when
// `copy`, with buddy copies) a copy to the keeper its peers route it to: the leader's from
// another node, the standby's from the leader's (stage_remote.hpp's copy_route).
void put_snapshot(StageSelf* self, std::int64_t steps_done, bool copy = true) {
  auto& st = self->state;
  StageStateSnapshot snapshot{steps_done, st.worker->snapshot()};
  const auto route = st.links ? copy_route(st.peers, st.links->node) : CopyRoute{};
  const bool copied = copy && st.job->plan.recovery.buddy_copies == BuddyCopies::on && route.keeper;
  auto tensors = copied ? snapshot.tensors() : std::vector<NamedTensor>{};
  const auto optimizer_steps = snapshot.optimizer_steps();
  st.job->services.snapshots->put(st.worker->rank(), std::move(snapshot));
  if (copied) send_snapshot_copy(self, route, steps_done, tensors, optimizer_steps);
}

// Without buddy copies: the copy of its snapshot after `steps_done` steps that a
// checkpoint of the leader, or a grow at that boundary, asks for (CopySnapshot).
void copy_snapshot_to_keeper(StageSelf* self, std::int64_t steps_done) {
  auto& st = self->state;
  const int rank = st.worker->rank();
  if (!st.links || st.links->node == st.peers.keeper_node || !st.peers.keeper)
    throw std::logic_error(fmt::format("stage {}: asked for a copy of its snapshot, but it runs "
                                       "on the keeper's node {} or knows no keeper",
                                       rank, st.peers.keeper_node));
  const auto snap = st.job->services.snapshots ? st.job->services.snapshots->get(rank, steps_done) : nullptr;
  if (!snap || snap->marker)
    throw std::runtime_error(fmt::format("stage {} holds no snapshot after step {} to copy to "
                                         "node {}",
                                         rank, steps_done, st.peers.keeper_node));
  send_snapshot_copy(self, CopyRoute{st.peers.keeper, st.peers.keeper_node}, steps_done, snap->tensors(),
                     snap->optimizer_steps());
}

bool snapshot_due(const Job& job, std::int64_t steps_done) {
  return job.services.snapshots && job.plan.recovery.snapshot_every > 0 &&
         steps_done % job.plan.recovery.snapshot_every == 0;
}

// Every handler body runs through this: an exception becomes the actor's exit reason.
template <class F>
void guarded(StageSelf* self, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    self->quit(failure(e.what()));
  }
}

// A request handler's body: its reply, or (on an exception) the actor's failure, which is
// also the reply the requester gets.
template <class T, class F>
caf::result<T> replying(StageSelf* self, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    self->quit(failure(e.what()));
    return failure(e.what());
  }
}

// A stage actor; `join_group`: join the stage group of generation 0 now (a replacement
// joins the next generation with every other stage once the recovery restored it).
StageActor::behavior_type stage_behavior(StageSelf* self, std::shared_ptr<const Job> job, int rank,
                             StageWorker::Clock::time_point epoch, bool join_group) {
  auto& st = self->state;
  st.job = job;
  guarded(self, [&] {
    st.worker = std::make_unique<StageWorker>(job->plan.model, job->plan.actor_placement(rank),
                                              job->plan.placement.model_stages(),
                                              job->plan.actor_data(rank), epoch, job->plan.make_model);
    // A replacement joins the next generation with every other stage after the restore.
    if (join_group) join_groups(self, 0);
    const auto epoch_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              epoch.time_since_epoch()).count();
    st.probe = std::make_unique<trace::StageProbe>(
        rank, epoch_ns, job->plan.placement, job->services.trace ? &job->services.trace->stage(rank) : nullptr,
        job->services.progress ? &job->services.progress->stage(rank) : nullptr);
    // A traced GPU stage times its actions on the device (CUDA events), not by the host.
    if (job->services.trace) st.probe->use_device_clocks(st.worker->device_clocks());
    st.worker->set_listener(st.probe.get());
    st.worker->set_fault(job->services.fault);
  });
  return {
      [=](const PeerTable& peers) { self->state.peers = peers; },
      [=](const StepPlan& plan) {
        guarded(self, [&] {
          self->state.coordinator = caf::actor_cast<CoordinatorActor>(self->current_sender());
          self->state.round = plan.round;
          const auto& fault = self->state.job->services.fault;
          if (fault && plan.phase == Phase::train && fault->exit_process(plan.step)) {
            die_by_injected_exit(fmt::format("stage {}: fault.inject exit: this process dies at step {}",
                                             self->state.worker->rank(), plan.step));
          }
          if (fault && plan.phase == Phase::train && fault->hang(self->state.worker->rank(), plan.step)) {
            fmt::print(stderr, "stage {}: fault.inject hang: never starting step {}\n",
                       self->state.worker->rank(), plan.step);
            return;
          }
          self->state.probe->plan_received(plan);
          if (fault && plan.phase == Phase::train && fault->crash(self->state.worker->rank(), plan.step))
            throw std::runtime_error(fmt::format(
                "injected crash at the start of step {} (fault.inject crash:stage={}:step={})",
                plan.step, self->state.worker->rank(), plan.step));
          self->state.worker->begin(plan);
          drive(self);
        });
      },
      [=](PipeMessage& message) {
        guarded(self, [&] {
          self->state.probe->received(message);
          self->state.worker->accept(std::move(message));
          drive(self);
        });
      },
      [=](const OptimizerStep& step) {
        return replying<OptimizerDone>(self, [&] {
          self->state.probe->optimizer_received(step);
          const auto& fault = self->state.job->services.fault;
          if (fault && fault->crash_in_optimizer(self->state.worker->rank(), step.step))
            throw std::runtime_error(fmt::format(
                "injected crash in the optimizer step of step {} (fault.inject "
                "crash:stage={}:step={}:when=optimizer)",
                step.step, self->state.worker->rank(), step.step));
          double allgather_ms = 0.0;
          if (step.skip)
            self->state.worker->discard_gradients();
          else
            allgather_ms = self->state.worker->optimizer_step(self->state.job->plan.adamw, step.lr,
                                                              step.grad_scale);
          // Before the reply: once every stage has answered, the snapshot is there.
          if (snapshot_due(*self->state.job, step.step + 1)) put_snapshot(self, step.step + 1);
          OptimizerDone done{self->state.worker->rank(), step.step, allgather_ms};
          self->state.probe->done_sending(done);
          return done;
        });
      },
      [=](const PipeHeader& header) {
        guarded(self, [&] { receive_over_channel(self, header); });
      },
      [=](const ChannelFailure& f) {
        // A transfer of an aborted round (its peer died, a recovery voided it) is stale.
        if (!self->state.worker || !self->state.worker->aborted(f.round)) self->quit(failure(f.what));
      },
      [=](const TakeSnapshot& take) {
        return replying<SnapshotTaken>(self, [&] {
          put_snapshot(self, take.steps_done);
          return SnapshotTaken{self->state.worker->rank(), take.steps_done};
        });
      },
      [=](const CopySnapshot& ask) {
        return replying<SnapshotTaken>(self, [&] {
          copy_snapshot_to_keeper(self, ask.steps_done);
          return SnapshotTaken{self->state.worker->rank(), ask.steps_done};
        });
      },
      [=](const WriteShard& ask) {
        return replying<bool>(self, [&] {
          write_own_shard(self, ask);
          return true;
        });
      },
      [=](const RestoreStage& restore) {
        return replying<StageRestored>(self, [&] {
          auto& st = self->state;
          drop_round(self, restore.round_fence);
          const auto snap = st.job->services.snapshots ? st.job->services.snapshots->get(st.worker->rank(), restore.steps_done)
                                              : nullptr;
          if (!snap)
            throw std::logic_error(fmt::format("stage {}: no snapshot of step {} to restore",
                                               st.worker->rank(), restore.steps_done));
          st.worker->restore_snapshot(snap->chunks);
          return StageRestored{st.worker->rank(), restore.steps_done};
        });
      },
      [=](RestoreFromCopy& restore) {
        // Answered once the copy's bytes arrived (CopyArrived).
        return replying<StageRestored>(self, [&]() -> caf::result<StageRestored> {
          auto& st = self->state;
          if (const auto& fault = st.job->services.fault; fault && fault->exit_in_restore())
            die_by_injected_exit(fmt::format("stage {}: fault.inject exit: this process dies as the stage is told "
                                             "to restore node 0's copy of its state after step {}",
                                             st.worker->rank(), restore.copy.steps_done));
          st.worker->abort(restore.round_fence);
          st.probe->plan_aborted();
          st.restoring = self->make_response_promise<StageRestored>();
          receive_snapshot_copy(self, std::move(restore.copy));
          return st.restoring;
        });
      },
      [=](CopyArrived& arrived) {
        auto& st = self->state;
        auto promise = std::move(st.restoring);
        try {
          if (!arrived.error.empty())
            throw std::runtime_error(fmt::format("stage {}: node 0's copy of its snapshot after "
                                                 "step {} did not arrive: {}",
                                                 st.worker->rank(), arrived.copy.steps_done,
                                                 arrived.error));
          st.worker->restore_state(arrived.copy.tensors, arrived.copy.optimizer_steps);
          // Kept here too: the next recovery may restore this step again. Every stage of
          // this process goes back to the same step (a rejoin, or a checkpoint): newer
          // snapshots are the replay's, and must not push this one out of the store.
          // The copy's tensors are that state where the stage is one chunk on the host
          // (restored_snapshot.hpp): kept as they are, not captured again.
          st.job->services.snapshots->discard_after(arrived.copy.steps_done);
          const int rank = st.worker->rank();
          auto kept = restored_snapshot(st.job->plan.actor_placement(rank), arrived.copy.steps_done,
                                        std::move(arrived.copy.tensors), arrived.copy.optimizer_steps);
          if (kept)
            st.job->services.snapshots->put(rank, std::move(*kept));
          else
            put_snapshot(self, arrived.copy.steps_done, /*copy=*/false);
          promise.deliver(StageRestored{st.worker->rank(), arrived.copy.steps_done});
        } catch (const std::exception& e) {
          promise.deliver(failure(e.what()));
          self->quit(failure(e.what()));
        }
      },
      [=](const AbortRound& abort) {
        return replying<RoundAborted>(self, [&] {
          auto& st = self->state;
          drop_round(self, abort.round_fence);
          return RoundAborted{st.worker->rank()};
        });
      },
      [=](const RestoreFromReplica& restore) {
        return replying<StageRestored>(self, [&] {
          auto& st = self->state;
          st.worker->restore_state(restore.state.tensors, restore.state.optimizer_steps);
          return StageRestored{st.worker->rank(), restore.steps_done};
        });
      },
      [=](const JoinReplicaGroup& join) -> caf::result<ReplicaGroupJoined> {
        auto& st = self->state;
        try {
          join_groups(self, join.generation);
          return ReplicaGroupJoined{st.worker->rank()};
        } catch (const CollectiveError& e) {
          // A replica that died while joining: the coordinator's next recovery joins again.
          return failure(e.what());
        } catch (const std::exception& e) {
          self->quit(failure(e.what()));
          return failure(e.what());
        }
      },
      [=](snapshot_atom) {
        return replying<StageSnapshot>(self, [&] {
          return StageSnapshot{self->state.worker->rank(), self->state.worker->capture_state(),
                               self->state.worker->optimizer_steps()};
        });
      },
      [=](weights_atom) -> caf::result<WeightsReply> {
        auto weights = self->state.worker->weights();
        guarded(self, [&] { send_weights_payload(self, weights); });
        return weights;
      },
  };
}

}  // namespace

StageActor::behavior_type stage_actor(StageSelf* self, std::shared_ptr<const Job> job, int rank,
                          StageWorker::Clock::time_point epoch,
                          std::shared_ptr<const StageLinks> links, bool join_group) {
  self->state.links = std::move(links);
  return stage_behavior(self, std::move(job), rank, epoch, join_group);
}

StageActor::behavior_type restarted_stage_actor(StageSelf* self, std::shared_ptr<const Job> job, int rank,
                                    StageWorker::Clock::time_point epoch,
                                    std::shared_ptr<const StageLinks> links,
                                    std::int64_t round_fence) {
  self->state.links = std::move(links);
  auto behavior = stage_behavior(self, std::move(job), rank, epoch, /*join_group=*/false);
  if (self->state.worker) self->state.worker->abort(round_fence);
  return behavior;
}

}  // namespace conveyor
