#pragma once
// Whether a job over several processes takes a replacement for a lost node other than 0,
// asked of the config before the job exists: the rule of actors/plan/node_replacement.hpp,
// which the composition root also applies to the resolved job.
#include "apps/config/run_config.hpp"

namespace conveyor {

bool takes_replacements(const RunConfig& config);

}  // namespace conveyor
