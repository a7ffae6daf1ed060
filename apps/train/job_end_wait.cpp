#include "apps/train/job_end_wait.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <thread>

#include "actors/cluster/node_setup.hpp"
#include "transport/rendezvous/error.hpp"

namespace conveyor {

void await_job_end(RendezvousClient& client, int node, std::chrono::milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  bool ended = false;
  while (!ended && std::chrono::steady_clock::now() - start < limit) {
    try {
      ended = !client.get(kJobRunningKey).has_value();
    } catch (const RendezvousError&) {
      ended = true;  // node 0, which hosts the store, is gone
    }
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  throw std::runtime_error(fmt::format(
      "node {} was started again while the job still ran, and this job takes no replacements "
      "(a lost node rejoins with CPU stages, fault.buddy_copies on or checkpoint.every > 0, "
      "fault.policy restart and fault.rejoin_timeout_s > 0): {} after {:.1f} s; the supervisor starts this node again "
      "to join the whole job's new start",
      node, ended ? "the job ended" : "the job did not end", waited));
}

}  // namespace conveyor
