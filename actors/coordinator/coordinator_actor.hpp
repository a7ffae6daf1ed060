#pragma once
// The coordinator drives training: per step it sends every stage actor its action list,
// gathers their reports, computes the loss, the global gradient norm and the clip scale,
// has every stage take its optimizer step together (a step is atomic), evaluates on the
// held-out split every `eval_every` steps, and finally gathers the weights. It monitors
// every stage: a stage failure ends the run with that stage's reason.
// With a CheckpointHook in the job, at every step boundary it asks the hook whether to
// snapshot (or snapshot and stop), gathers every stage's state and hands it over before
// the next step starts (checkpoint_hook.hpp).
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "actors/coordinator/checkpoint_hook.hpp"
#include "actors/messages.hpp"
#include "actors/runtime/training_job.hpp"
#include "actors/trace/coordinator_probe.hpp"

namespace conveyor {

struct CoordinatorState {
  std::shared_ptr<const TrainingJob> job;
  TrainingObserver* observer = nullptr;
  CheckpointHook* checkpoints = nullptr;  // job->checkpoints
  std::vector<caf::actor> stages;
  std::vector<std::shared_ptr<const std::vector<sched::Action>>> train_plans, eval_plans;

  caf::response_promise done;
  std::int64_t round = 0;
  std::int64_t step = 0;
  Phase phase = Phase::train;
  std::vector<StageReport> reports;
  std::chrono::steady_clock::time_point step_start;
  StepMetrics last_step;
  EvalMetrics last_eval;
  bool finishing = false;
  std::vector<WeightsReply> weights;
  trace::CoordinatorProbe probe;  // trace records of plans, reports, optimizer steps
  static inline const char* name = "coordinator";
};

caf::behavior coordinator_actor(caf::stateful_actor<CoordinatorState>* self,
                                std::shared_ptr<const TrainingJob> job,
                                std::vector<caf::actor> stages, TrainingObserver* observer);

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::TrainResult)
