#pragma once
// The CAF actor around a StageWorker: it routes the worker's outgoing messages to the
// peer that holds the target model stage (or back into itself), reports to the
// coordinator when its plan is done, and turns any error into an actor failure whose
// reason names the stage and the problem. Spawned detached (a thread of its own) or on a
// scheduler worker of its own (actors/runtime/run_job.cpp): either way its kernels never
// block another stage, and stages run in parallel.
#include <caf/all.hpp>
#include <memory>

#include "actors/stage/stage_links.hpp"
#include "actors/messages/coordinator_interface.hpp"
#include "actors/messages/messages.hpp"
#include "actors/messages/stage_interface.hpp"
#include "actors/job/job_services.hpp"
#include "actors/trace/stage_probe.hpp"
#include "actors/worker/stage_worker.hpp"

namespace conveyor {

struct StageActorState {
  std::shared_ptr<const Job> job;
  std::unique_ptr<StageWorker> worker;
  std::unique_ptr<trace::StageProbe> probe;  // trace records and watchdog state
  PeerTable peers;
  CoordinatorActor coordinator;  // the sender of the last plan
  std::int64_t round = 0;  // of the last plan received (a failed stage group drops it)
  // Edges to other processes (actors/cluster/); null when every peer is in this process.
  std::shared_ptr<const StageLinks> links;
  // A RestoreFromCopy waiting for its bytes (stage_remote.hpp CopyArrived).
  caf::typed_response_promise<StageRestored> restoring;
  static inline const char* name = "stage";
};

/// A stage actor. Its edges to ranks of other processes go through `links`
/// (actors/stage/stage_remote.hpp); null when every peer is in this process. `join_group`:
/// join the stage group's generation 0 as it starts (false for a lost node's replacement,
/// whose stages join the next generation with every other stage once the recovery
/// restored them).
using StageSelf = StageActor::stateful_base<StageActorState>;

StageActor::behavior_type stage_actor(StageSelf* self,
                          std::shared_ptr<const Job> job, int rank,
                          StageWorker::Clock::time_point epoch,
                          std::shared_ptr<const StageLinks> links, bool join_group);

/// The replacement of a failed stage actor (fault.policy restart): a stage_actor that
/// ignores every message of a round up to `round_fence` (the aborted ones) until the
/// coordinator restores its state (RestoreStage).
StageActor::behavior_type restarted_stage_actor(StageSelf* self,
                                    std::shared_ptr<const Job> job, int rank,
                                    StageWorker::Clock::time_point epoch,
                                    std::shared_ptr<const StageLinks> links,
                                    std::int64_t round_fence);

}  // namespace conveyor
