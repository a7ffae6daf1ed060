#pragma once
#include "actors/runtime/training_job.hpp"

namespace conveyor {

/// Runs a whole training job in this process: an actor system with one detached stage
/// actor per rank and a coordinator. Blocks until the run ends; progress goes to
/// `observer` (from the coordinator's thread). Throws std::runtime_error with the
/// failing stage's reason when a stage fails.
TrainResult run_training(const TrainingJob& job, TrainingObserver& observer);

}  // namespace conveyor
