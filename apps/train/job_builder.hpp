#pragma once
// Resolves a validated RunConfig into the job's plan: loads and splits the corpus,
// generates the schedule, places the model on the ranks.
#include "actors/plan/job_plan.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

/// Throws InputError for problems the config validation cannot see alone (a data file
/// that is missing, empty or holds tokens outside the vocabulary; a corpus too short; a
/// job that cannot fit in this machine's memory, memory_preflight.hpp: `processes` share
/// the job's stages).
JobPlan build_job_plan(const RunConfig& config, int processes = 1);

}  // namespace conveyor
