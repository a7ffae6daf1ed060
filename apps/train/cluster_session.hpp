#pragma once
// This process's place in a multi-process `conveyor train`: node 0 hosts the rendezvous
// store; every node joins it (rendezvous.timeout_s), heartbeats through it (a node silent
// for rendezvous.peer_silence_s is lost), reports its identity
// (node_identity.hpp) and checks it against node 0's, then runs its part of the job
// (actors/runtime/run_job.hpp). Everything that can fail before training starts fails
// here, before any file is written, with an InputError naming the address, the missing
// ranks or the differing keys.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/runtime/run_job.hpp"
#include "apps/config/run_config.hpp"
#include "apps/launch/launch_spec.hpp"
#include "transport/rendezvous/client.hpp"
#include "transport/rendezvous/server.hpp"

namespace conveyor {

class ClusterSession {
 public:
  /// Hosts the store (node 0), joins, exchanges identities (`resume_step`: the step of the
  /// checkpoint this node resumes from, -1 none). Throws InputError.
  ClusterSession(const LaunchSpec& spec, const std::string& token, const RunConfig& config,
                 std::int64_t resume_step = -1);
  ~ClusterSession();

  int node() const { return spec_.node_rank; }
  int nnodes() const { return spec_.nnodes; }
  const std::vector<int>& node_of_rank() const { return node_of_rank_; }
  std::string describe() const;
  /// This host's steady clock against node 0's, ns (node 0 time = local + offset); 0 on
  /// node 0. Measured once at the rendezvous (NodeSetup::steady_clock_offset).
  std::int64_t clock_offset_ns() const;

  /// checkpoint.writers every_node: every node proves that it sees node 0's checkpoint
  /// folder, `folder` on node 0 (shared_folder_check.hpp); a replacement joining a running
  /// job does not take part. Throws InputError.
  void check_shared_checkpoint_folder(const std::string& folder);

  /// Runs this node's stages (and on node 0 the coordinator): node 0 returns the result,
  /// the others std::nullopt.
  std::optional<TrainResult> run(const Job& job, TrainingObserver* observer);

 private:
  LaunchSpec spec_;
  NodeSetup setup_;
  bool resume_unused_ = false;  // a replacement given --resume: its stages restore from node 0
  std::vector<int> node_of_rank_;
  std::unique_ptr<RendezvousServer> server_;
  std::unique_ptr<RendezvousClient> client_;
};

/// A session when the job spans processes (nnodes > 1, from flags or the launcher's
/// environment) or when transport.kind is ucx; null for an ordinary one-process run.
/// The token comes from `token` (--token), else the CONVEYOR_TOKEN variable.
std::unique_ptr<ClusterSession> join_cluster(const LaunchFlags& flags,
                                             const std::optional<std::string>& token,
                                             const RunConfig& config, const EnvLookup& env,
                                             std::int64_t resume_step = -1);

}  // namespace conveyor
