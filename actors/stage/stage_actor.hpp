#pragma once
// The CAF actor around a StageWorker: it routes the worker's outgoing messages to the
// peer that holds the target model stage (or back into itself), reports to the
// coordinator when its plan is done, and turns any error into an actor failure whose
// reason names the stage and the problem. Spawned detached: each stage owns a thread,
// so its kernels never block a scheduler thread and stages run in parallel.
#include <caf/all.hpp>
#include <memory>

#include "actors/messages.hpp"
#include "actors/runtime/training_job.hpp"

namespace conveyor {

struct StageActorState {
  std::shared_ptr<const TrainingJob> job;
  std::unique_ptr<StageWorker> worker;
  PeerTable peers;
  caf::actor coordinator;
  static inline const char* name = "stage";
};

caf::behavior stage_actor(caf::stateful_actor<StageActorState>* self,
                          std::shared_ptr<const TrainingJob> job, int rank,
                          StageWorker::Clock::time_point epoch);

}  // namespace conveyor
