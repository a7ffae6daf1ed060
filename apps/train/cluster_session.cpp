#include "apps/train/cluster_session.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/asio/ip/udp.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <algorithm>
#include <cstdlib>
#include <random>

#include "apps/launch/replica_nodes.hpp"
#include "apps/train/job_end_wait.hpp"
#include "apps/train/node_identity.hpp"
#include "apps/train/node_replacement.hpp"
#include "apps/train/preemption.hpp"
#include "apps/train/shared_folder_check.hpp"
#include "apps/train/supervisor.hpp"
#include "apps/train/self_rejoin.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

using std::chrono::milliseconds;

milliseconds ms_of(double seconds) { return milliseconds(static_cast<std::int64_t>(seconds * 1000)); }

// The address of this host's interface that routes to the rendezvous host: where the
// other nodes reach this node (a UDP "connect" sends nothing, it only picks the route).
std::string address_towards(const std::string& host, int port) {
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  try {
    ip::udp::resolver resolver(io);
    const auto endpoints = resolver.resolve(host, std::to_string(port));
    ip::udp::socket socket(io);
    socket.connect(*endpoints.begin());
    return socket.local_endpoint().address().to_string();
  } catch (const boost::system::system_error& e) {
    throw InputError(fmt::format("launch: rendezvous host '{}' is not reachable from this node: {}",
                                 host, e.what()));
  }
}

}  // namespace

ClusterSession::ClusterSession(const LaunchSpec& spec, const std::string& token,
                               const RunConfig& config, std::int64_t resume_step)
    : spec_(spec) {
  // Every replica's stage actors (replica-major), in contiguous ranges over the nodes.
  node_of_rank_ = node_of_actor(config, spec.nnodes);
  const auto rdzv_timeout = ms_of(config.rendezvous.timeout_s);
  const std::string where = fmt::format("rendezvous {} ({})", rendezvous_address(spec), spec.source);
  // One process forcing UCX needs a store of its own: an ephemeral port, never a clash.
  const bool alone = spec.nnodes == 1;
  if (spec.node_rank == 0) {
    RendezvousServerOptions o;
    o.host = spec.rdzv_host;
    o.port = alone ? 0 : static_cast<std::uint16_t>(spec.rdzv_port);
    o.token = token;
    o.log = [](std::string_view line) { fmt::print(stderr, "conveyor: {}\n", line); };
    try {
      server_ = std::make_unique<RendezvousServer>(o);
    } catch (const RendezvousError& e) {
      throw InputError(fmt::format("{}: {}{}", where, e.what(),
                                   e.code() == RendezvousErrc::address_in_use
                                       ? " (another job on this port? pick a free one with "
                                         "--rdzv HOST:PORT or MASTER_PORT)"
                                       : ""));
    } catch (const std::exception& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    }
  }
  RendezvousClientOptions c;
  c.host = spec.rdzv_host;
  c.port = server_ ? server_->port() : static_cast<std::uint16_t>(spec.rdzv_port);
  c.token = token;
  // Every store client of this process (this one, the liveness watch's, the groups') shares
  // one route: once node 0 is lost they move together to the standby's copy of the store
  // (actors/cluster/leader_failover.hpp).
  c.route = std::make_shared<rendezvous::StoreRoute>(c.host, c.port);
  c.connect_timeout = rdzv_timeout;
  // A reply's own travel time counts on top of each wait: never more than the wait itself,
  // so that a frozen server fails a short rendezvous.timeout_s in about twice that.
  c.io_timeout = std::clamp(rdzv_timeout, std::chrono::milliseconds(1000), c.io_timeout);
  try {
    client_ = std::make_unique<RendezvousClient>(c);
    client_->join(static_cast<std::uint32_t>(spec.node_rank),
                  static_cast<std::uint32_t>(spec.nnodes), rdzv_timeout);
    const NodeIdentity mine = identity_of(config, resume_step);
    client_->set(fmt::format("identity/{}", spec.node_rank), mine.to_json());
    // Node 0 marks the job running once every node's stages are known: a node that joins
    // after that replaces a lost one (actors/runtime/run_job.hpp) and compares itself with node 0 only.
    setup_.rejoining = spec.node_rank != 0 && client_->get(kJobRunningKey).has_value();
    if (setup_.rejoining && supervised() && !takes_replacements(config))
      await_job_end(*client_, spec.node_rank,
                    ms_of(config.rendezvous.peer_silence_s + config.rendezvous.timeout_s));
    auto identity = [&](int n) {
      return NodeIdentity::from_json(
          rendezvous::to_text(client_->wait(fmt::format("identity/{}", n), rdzv_timeout)), n);
    };
    std::optional<std::string> mismatch;
    if (spec.node_rank == 0) {
      for (int n = 1; n < spec.nnodes && !mismatch; ++n)
        mismatch = identity_mismatch(n, identity(n), mine);
    } else {
      const NodeIdentity node0 = identity(0);
      NodeIdentity compared = mine;
      // A replacement's stages take their state from node 0's copies of their snapshots:
      // what it would resume from does not matter (a supervised node passes --resume latest
      // in case the whole job starts again, apps/train/supervisor.hpp).
      if (setup_.rejoining) {
        resume_unused_ = mine.resume_step >= 0;
        compared.resume_step = node0.resume_step;
      }
      mismatch = identity_mismatch(spec.node_rank, compared, node0);
    }
    // Node 0 hosts the store: it stays until every node has compared, so that each one
    // can say why the job does not start (a node that never arrives only delays that).
    try {
      if (!setup_.rejoining) client_->barrier("identities", rdzv_timeout);
    } catch (const RendezvousError&) {
      if (!mismatch) throw;
    }
    if (mismatch) throw InputError(*mismatch);
  } catch (const RendezvousError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
  setup_.nnodes = spec.nnodes;
  setup_.node = spec.node_rank;
  setup_.node_of_rank = node_of_rank_;
  setup_.advertise_host = address_towards(spec.rdzv_host, c.port);
  setup_.rendezvous_timeout = rdzv_timeout;
  setup_.peer_silence = ms_of(config.rendezvous.peer_silence_s);
  setup_.transport_timeout = ms_of(config.transport.timeout_s);
  setup_.rejoin_timeout = config.fault.policy == FaultPolicy::restart ? ms_of(config.fault.rejoin_timeout_s)
                                                                   : milliseconds(0);
  setup_.through_channels = config.transport.kind == TransportKind::ucx;
  // A stop caught on any node stops the whole job at node 0's coordinator.
  setup_.local_stop = [] { return stop_signal(); };
  setup_.peer_stop = [](int node, int signal) { note_peer_stop(node, signal); };
  // Node k > 0 declared lost while it did not run becomes its own replacement.
  if (spec.node_rank != 0 && may_rejoin_itself(config))
    setup_.on_declared_lost = [](const std::string& why) { rejoin_as_replacement(why); };
  // UCX_TLS when set; else TCP (and self for a process's own loopback), the transports
  // with which a dead peer fails the waits on it instead of aborting this process.
  const char* tls = std::getenv("UCX_TLS");
  setup_.ucx_transports = tls && *tls ? tls : "tcp,self";
  if (spec.node_rank != 0) {
    try {
      setup_.steady_clock_offset = client_->clock_offset().steady;
    } catch (const RendezvousError& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    }
  }
  setup_.store = c;
  setup_.store.connect_timeout = std::chrono::milliseconds(2000);
  setup_.store.io_timeout = std::chrono::milliseconds(2000);
}

ClusterSession::~ClusterSession() = default;

void ClusterSession::check_shared_checkpoint_folder(const std::string& folder) {
  if (setup_.rejoining || spec_.nnodes <= 1) return;
  check_shared_folder(*client_, spec_.node_rank, spec_.nnodes, folder, checkpoint::posix_filesystem(),
                      setup_.rendezvous_timeout);
}

std::string ClusterSession::describe() const {
  std::vector<int> mine;
  for (int r = 0; r < static_cast<int>(node_of_rank_.size()); ++r)
    if (node_of_rank_[r] == spec_.node_rank) mine.push_back(r);
  return fmt::format("{}; stages {} here, reached at {}{}{}", conveyor::describe(spec_),
                     fmt::join(mine, " "), setup_.advertise_host,
                     setup_.rejoining ? "; the job is running: this process replaces the lost node" : "",
                     resume_unused_ ? " (it takes its stages' state from node 0, not from --resume)" : "");
}

std::int64_t ClusterSession::clock_offset_ns() const { return setup_.steady_clock_offset.count(); }

std::optional<TrainResult> ClusterSession::run(const Job& job, TrainingObserver* observer) {
  return run_job(job, setup_, client_.get(), observer);
}

std::unique_ptr<ClusterSession> join_cluster(const LaunchFlags& flags,
                                             const std::optional<std::string>& token,
                                             const RunConfig& config, const EnvLookup& env,
                                             std::int64_t resume_step) {
  const LaunchSpec spec = resolve_launch(flags, env);
  if (spec.nnodes == 1 && config.transport.kind != TransportKind::ucx) return nullptr;
  std::string t = token.value_or("");
  if (!token)
    if (auto from_env = env("CONVEYOR_TOKEN")) t = *from_env;
  if (t.empty() && spec.nnodes == 1) {  // a store for this process alone: a secret of its own
    std::random_device random;
    t = fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
  }
  return std::make_unique<ClusterSession>(spec, t, config, resume_step);
}

}  // namespace conveyor
