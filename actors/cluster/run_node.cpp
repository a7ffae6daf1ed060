#include "actors/cluster/run_node.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <stdexcept>

#include "actors/cluster/node_directory.hpp"
#include "actors/cluster/remote_weights.hpp"
#include "actors/cluster/stage_links.hpp"
#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/error_text.hpp"
#include "actors/stage/stage_actor.hpp"
#include "kernels/cpu/threads.hpp"
#include "transport/ucx/ucx_channel.hpp"
#include "transport/ucx/ucx_hub.hpp"

namespace conveyor {
namespace {

using namespace std::chrono;

std::string key(const char* what, int node) { return fmt::format("{}/{}", what, node); }

std::string node_name(int node) { return fmt::format("node {}", node); }

std::vector<std::uint8_t> to_bytes(const std::vector<std::byte>& b) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(b.data());
  return {p, p + b.size()};
}

std::vector<std::byte> from_bytes(const rendezvous::Bytes& b) {
  const auto* p = reinterpret_cast<const std::byte*>(b.data());
  return {p, p + b.size()};
}

// Sends an exit to every actor it holds when the run ends, well or not, so that the
// actor system's destructor (which waits for every actor) never waits forever.
struct EndActors {
  std::vector<caf::actor> actors;
  ~EndActors() {
    for (auto& a : actors)
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

bool normal_end(const caf::error& e) {
  return !e || e == caf::exit_reason::user_shutdown || e == caf::exit_reason::normal;
}

// Every node's UCX address, and a channel to each node its stages talk to. The channel
// kind is chosen here, per peer: host memory goes over UCX. GPU stages across processes
// plug in here with an NCCL RemoteChannel (transport/nccl/, one communicator per edge, its
// unique id exchanged through the store like ucx/<node>), picked by the stages' device kind.
std::shared_ptr<StageLinks> connect_channels(const NodeSetup& setup, RendezvousClient& store,
                                             std::shared_ptr<UcxHub> hub) {
  auto links = std::make_shared<StageLinks>();
  links->node = setup.node;
  links->node_of_rank = setup.node_of_rank;
  links->through_channels = setup.through_channels;
  links->timeout = setup.transport_timeout;
  store.set(key("ucx", setup.node), to_bytes(hub->address()));
  for (int j = 0; j < setup.nnodes; ++j) {
    if (j == setup.node && !setup.through_channels) continue;
    const auto address = store.wait(key("ucx", j), setup.rendezvous_timeout);
    hub->connect(j, from_bytes(address), node_name(j));
    links->channels[j] = std::make_shared<UcxChannel>(hub, j, node_name(j));
  }
  return links;
}

// Without peer failure handling UCX aborts the process when a peer dies mid-transfer
// (a failed process_vm_readv, a reset connection). Handling needs transports that can
// detect a dead peer: TCP (and self); UCX 1.13's shared-memory transports cannot.
bool ucx_detects_peer_failure(const std::string& transports) {
  for (const char* shm : {"sm", "posix", "sysv", "cma", "knem", "xpmem", "all", "^"})
    if (transports.find(shm) != std::string::npos) return false;
  return true;
}

// A run that ends by an exception leaves its peers behind: the hub must not wait for them.
struct AbandonOnError {
  std::shared_ptr<UcxHub> hub;
  int exceptions = std::uncaught_exceptions();
  ~AbandonOnError() {
    if (std::uncaught_exceptions() > exceptions) hub->abandon();
  }
};

// Node 0's steady clock at start, in this node's steady clock.
StageWorker::Clock::time_point shared_epoch(const NodeSetup& setup, RendezvousClient& store) {
  using Clock = StageWorker::Clock;
  if (setup.node == 0) {
    const auto now = Clock::now();
    store.set("epoch", std::to_string(duration_cast<nanoseconds>(now.time_since_epoch()).count()));
    return now;
  }
  const auto text = rendezvous::to_text(store.wait("epoch", setup.rendezvous_timeout));
  const auto offset = store.clock_offset();  // server time = local time + offset
  return Clock::time_point(nanoseconds(std::stoll(text)) - offset.steady);
}

std::pair<std::string, std::uint16_t> split_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("bad CAF endpoint '" + text + "'");
  std::string host = text.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, static_cast<std::uint16_t>(std::stoi(text.substr(colon + 1)))};
}

// Node k > 0: waits until its stages are down (the coordinator ends them). Returns the
// failure of a local stage, if one failed.
void watch_stages(caf::scoped_actor& self, const NodeStages& mine, const caf::actor& node0,
                  milliseconds grace) {
  for (const auto& a : mine.actors) self->monitor(a);
  self->monitor(node0);
  std::size_t alive = mine.actors.size();
  bool node0_gone = false, waited_out = false;
  std::string failed;
  auto on_down = [&](caf::down_msg& d) {
    if (d.source == node0.address()) {
      node0_gone = true;
      return;
    }
    for (std::size_t i = 0; i < mine.actors.size(); ++i) {
      if (mine.actors[i].address() != d.source) continue;
      --alive;
      if (!normal_end(d.reason) && failed.empty())
        failed = fmt::format("stage {} failed: {}", mine.ranks[i],
                             error_text(self->system(), d.reason));
    }
  };
  while (alive > 0 && !waited_out) {
    if (!node0_gone)
      self->receive(on_down);
    else
      self->receive(on_down, caf::after(grace) >> [&] { waited_out = true; });
  }
  // Stages still alive would keep the actor system (and so this process) from ending:
  // nothing can end them normally once node 0 is gone.
  if (!failed.empty() || waited_out)
    for (const auto& a : mine.actors) self->send_exit(a, caf::exit_reason::kill);
  if (!failed.empty()) throw std::runtime_error(failed);
  if (waited_out)
    throw std::runtime_error(fmt::format(
        "node 0 ended or became unreachable while {} stage(s) of this node were still running",
        alive));
}

}  // namespace

std::optional<TrainResult> run_node(const TrainingJob& job_in, const NodeSetup& setup,
                                    RendezvousClient& store, TrainingObserver* observer) {
  auto job = std::make_shared<const TrainingJob>(job_in);
  set_cpu_kernel_threads(job->threads_per_stage);
  const int ranks = static_cast<int>(job->placement.ranks.size());
  if (static_cast<int>(setup.node_of_rank.size()) != ranks)
    throw std::logic_error("run_node: node_of_rank does not cover every rank");

  std::vector<int> local_ranks;
  for (int r = 0; r < ranks; ++r)
    if (setup.node_of_rank[r] == setup.node) local_ranks.push_back(r);

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  add_wire_types(cfg);
  // As in run_training: detached stages need only the coordinator's and the caller's
  // threads; the middleman has a thread of its own.
  const auto local = local_ranks.size();
  cfg.set("scheduler.max-threads", job->detached_stages ? 2 : local + 2);
  if (!job->detached_stages) {
    cfg.set("work-stealing.aggressive-poll-attempts", 10000);
    cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{microseconds(2)});
  }
  caf::actor_system system{cfg};
  // Every actor handle lives below this line: the system's destructor waits for every
  // actor, and a handle that outlived it would keep one alive forever.
  EndActors end;
  NodeStages mine{setup.node, local_ranks, {}};

  UcxOptions ucx;
  ucx.transports = setup.ucx_transports;
  ucx.detect_peer_failure = ucx_detects_peer_failure(ucx.transports);
  ucx.timeout = setup.transport_timeout;
  ucx.name = node_name(setup.node);
  auto hub = std::make_shared<UcxHub>(ucx);
  AbandonOnError abandon_on_error{hub};
  std::shared_ptr<const StageLinks> links = connect_channels(setup, store, hub);
  const auto epoch = shared_epoch(setup, store);

  for (int r : local_ranks) {
    auto a = job->detached_stages
                 ? system.spawn<caf::detached>(linked_stage_actor, job, r, epoch, links)
                 : system.spawn(linked_stage_actor, job, r, epoch, links);
    mine.actors.push_back(a);
    end.actors.push_back(a);
  }
  auto directory = system.spawn(node_directory, ranks, mine);
  end.actors.push_back(directory);
  auto port = system.middleman().publish(directory, 0, setup.advertise_host.c_str());
  if (!port)
    throw std::runtime_error(fmt::format("cannot publish node {}'s actors on {}: {}", setup.node,
                                         setup.advertise_host, system.render(port.error())));
  store.set(key("caf", setup.node), fmt::format("{}:{}", setup.advertise_host, *port));

  // One direct CAF connection per pair of nodes: node k dials nodes 0 .. k-1.
  std::vector<caf::actor> directories(setup.nnodes);
  for (int j = 0; j < setup.node; ++j) {
    const auto endpoint = rendezvous::to_text(store.wait(key("caf", j), setup.rendezvous_timeout));
    const auto [host, p] = split_endpoint(endpoint);
    auto remote = system.middleman().remote_actor(host, p);
    if (!remote)
      throw std::runtime_error(fmt::format("cannot reach node {}'s actors at {}: {}", j, endpoint,
                                           system.render(remote.error())));
    directories[j] = *remote;
  }

  caf::scoped_actor self{system};
  const auto io = setup.rendezvous_timeout;
  if (setup.node != 0) {
    std::string refused;
    self->request(directories[0], io, mine)
        .receive([](bool) {},
                 [&](caf::error& e) { refused = error_text(system, e); });
    if (!refused.empty())
      throw std::runtime_error(fmt::format("node 0 did not take this node's stages: {}", refused));
    store.barrier("stages", setup.rendezvous_timeout);
    // Once node 0 is gone nothing can end these stages normally: a short grace covers
    // exits still in flight behind its last messages.
    watch_stages(self, mine, directories[0], std::min(setup.transport_timeout, milliseconds(2000)));
    hub->drain_sends(setup.transport_timeout);
    return std::nullopt;
  }

  store.barrier("stages", setup.rendezvous_timeout);  // names the nodes that never announced
  std::vector<caf::actor> stages;
  std::string failed;
  self->request(directory, io, stages_atom::value)
      .receive([&](std::vector<caf::actor>& all) { stages = std::move(all); },
               [&](caf::error& e) { failed = error_text(system, e); });
  if (!failed.empty()) throw std::runtime_error("gathering the stage actors: " + failed);

  auto coordinator = system.spawn(coordinator_actor, job, stages, observer);
  end.actors.push_back(coordinator);
  TrainResult result;
  self->request(coordinator, caf::infinite, train_atom::value)
      .receive([&](TrainResult& r) { result = std::move(r); },
               [&](caf::error& e) { failed = error_text(system, e); });
  if (!failed.empty()) throw std::runtime_error(failed);
  fetch_remote_weights(result.weights, job->placement, *links, setup.transport_timeout);
  return result;
}

}  // namespace conveyor
