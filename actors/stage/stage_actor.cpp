#include "actors/stage/stage_actor.hpp"

#include <exception>

#include "actors/error_text.hpp"

namespace conveyor {
namespace {

using Self = caf::stateful_actor<StageActorState>;

// Runs what the worker can run now; routes its messages; reports a finished plan.
void drive(Self* self) {
  auto& st = self->state;
  std::vector<PipeMessage> to_self;
  auto outbox = [&](PipeMessage m) {
    const int dest = st.job->placement.chunk_of(m.to_model_stage).rank;
    if (dest == st.worker->rank()) {
      st.worker->accept(std::move(m));
    } else {
      self->send(st.peers.ranks.at(dest), std::move(m));
    }
  };
  st.worker->run_ready(outbox);
  if (st.worker->finished()) self->send(st.coordinator, st.worker->take_report());
}

// Every handler body runs through this: an exception becomes the actor's exit reason.
template <class F>
void guarded(Self* self, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    self->quit(failure(e.what()));
  }
}

}  // namespace

caf::behavior stage_actor(Self* self, std::shared_ptr<const TrainingJob> job, int rank,
                          StageWorker::Clock::time_point epoch) {
  auto& st = self->state;
  st.job = job;
  guarded(self, [&] {
    st.worker = std::make_unique<StageWorker>(job->model, job->placement.ranks.at(rank),
                                              job->placement.model_stages(), job->data, epoch,
                                              job->make_model);
  });
  return {
      [=](const PeerTable& peers) { self->state.peers = peers; },
      [=](const StepPlan& plan) {
        guarded(self, [&] {
          self->state.coordinator = caf::actor_cast<caf::actor>(self->current_sender());
          self->state.worker->begin(plan);
          drive(self);
        });
      },
      [=](PipeMessage& message) {
        guarded(self, [&] {
          self->state.worker->accept(std::move(message));
          drive(self);
        });
      },
      [=](const OptimizerStep& step) -> caf::result<OptimizerDone> {
        try {
          self->state.worker->optimizer_step(self->state.job->adamw, step.lr, step.grad_scale);
        } catch (const std::exception& e) {
          self->quit(failure(e.what()));
          return failure(e.what());
        }
        return OptimizerDone{self->state.worker->rank(), step.step};
      },
      [=](weights_atom) { return self->state.worker->weights(); },
  };
}

}  // namespace conveyor
