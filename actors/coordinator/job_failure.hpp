#pragma once
// The exit reason the coordinator ends every stage with when the job fails. A stage ended
// after a job that finished well gets user_shutdown; one ended because the job failed
// gets this error instead, so a process that holds only stages (node k > 0 of a job over
// processes) can tell the two apart and exit nonzero with node 0's reason: before, it
// saw user_shutdown either way, said "node 1 done" and exited 0 while node 0 exited 1.
// The reason crosses processes as a CAF error (a code and its message), so it is told
// apart by its message's fixed opening.
#include <caf/all.hpp>
#include <optional>
#include <string>

namespace conveyor {

/// The exit reason for a stage of a job that failed because of `why`.
caf::error job_failed(const std::string& why);

/// `why` of an exit reason made by job_failed; nullopt for any other reason.
std::optional<std::string> job_failure_reason(const caf::error& e);

}  // namespace conveyor
