#pragma once
// A node other than 0 that node 0 declared lost while it was not running (SIGSTOP and
// SIGCONT, a suspended machine, a network cut that healed) learns it from the mark node 0
// left in the store (LivenessOptions::on_declared_lost). Node 0 has taken its stages away
// and waits for a replacement: rather than fail, and leave node 0 waiting out
// fault.rejoin_timeout_s for nobody, the process becomes that replacement. It replaces
// its own image with `conveyor` of the same command line (execve), which finds the job
// running and rejoins as any replacement does (actors/runtime/run_job.hpp) — what a SIGKILL and a
// restart by hand or by --supervise would do, without the wait.
#include <string>

#include "apps/config/run_config.hpp"

namespace conveyor {

/// Called by main() first: the command line a rejoin starts again with.
void remember_command_line(int argc, char** argv);

/// True when this process may start again as its node's replacement: the job takes
/// replacements (node_replacement.hpp), no supervisor restarts it (that one does), and it
/// has done so fewer than fault.max_restarts times (CONVEYOR_SELF_REJOINS counts them).
bool may_rejoin_itself(const RunConfig& config);

/// Says `why` on stderr, then replaces this process with the remembered command line
/// (any thread may call it: the others end with the old image). Returns only when that
/// fails, saying so.
void rejoin_as_replacement(const std::string& why);

}  // namespace conveyor
