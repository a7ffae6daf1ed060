#pragma once
// A supervised node other than 0, started again, that finds the job still running when
// the job takes no replacements (node_replacement.hpp): node 0 fails the job once it
// notices this node's loss (within rendezvous.peer_silence_s), and its supervisor starts
// the whole job again from the newest checkpoint. Waiting for that here keeps this node's
// supervisor from spending its restarts while the old job is ending; the attempt then
// ends (exit 1) and the next one joins the new job.
#include <chrono>

#include "transport/rendezvous/client.hpp"

namespace conveyor {

/// Polls the store (every 250 ms) until the job's running key is gone or the store is
/// (node 0 hosts it), at most `limit`; then throws std::runtime_error saying which, and
/// after how long.
[[noreturn]] void await_job_end(RendezvousClient& client, int node, std::chrono::milliseconds limit);

}  // namespace conveyor
