#include "actors/runtime/run_job.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/checkpoint/remote_shards.hpp"
#include "actors/cluster/channel_setup.hpp"
#include "actors/cluster/leader_failover.hpp"
#include "actors/cluster/loss_relay.hpp"
#include "actors/cluster/node_directory.hpp"
#include "actors/cluster/peer_values.hpp"
#include "actors/cluster/progress_reporter.hpp"
#include "actors/cluster/remote_weights.hpp"
#include "actors/cluster/snapshot_keeper.hpp"
#include "actors/cluster/standby_role.hpp"
#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/coordinator/replica_weights.hpp"
#include "actors/fault/fault_spec.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/plan/elastic_plan.hpp"
#include "actors/stage/current_links.hpp"
#include "actors/runtime/detached_threads.hpp"
#include "actors/runtime/hang_watchdog.hpp"
#include "actors/runtime/job_setup.hpp"
#include "actors/runtime/node_watch.hpp"
#include "actors/runtime/peer_loss.hpp"
#include "actors/runtime/scheduler_polling.hpp"
#include "actors/stage/own_shard_write.hpp"
#include "actors/stage/stage_actor.hpp"
#include "actors/trace/hang_error.hpp"
#include "actors/trace/stage_probe.hpp"
#include "kernels/cpu/threads.hpp"
#include "transport/rendezvous/error.hpp"
#include "transport/rendezvous/liveness_watch.hpp"
#include "transport/ucx/ucx_hub.hpp"

namespace conveyor {
namespace {

using namespace std::chrono;

std::string key(const char* what, int node) { return fmt::format("{}/{}", what, node); }

// A failed job's stages may be blocked in a collective with a lost node's replica: a Gloo
// bucket on a frozen peer (its sockets open) waits out its whole timeout, transport.timeout_s,
// and the actor system would wait for it (a frozen node 1 of 2 replicas failed node 0 after
// 64 s instead of 11). Their results are not used: past this grace the system is abandoned
// and apps/main.cpp ends the process with _Exit (detached_threads.hpp).
constexpr milliseconds kFailedJobGrace{5000};

// Without peer failure handling UCX aborts the process when a peer dies mid-transfer
// (a failed process_vm_readv, a reset connection). Handling needs transports that can
// detect a dead peer: TCP (and self); UCX 1.13's shared-memory transports cannot.
bool ucx_detects_peer_failure(const std::string& transports) {
  for (const char* shm : {"sm", "posix", "sysv", "cma", "knem", "xpmem", "all", "^"})
    if (transports.find(shm) != std::string::npos) return false;
  return true;
}

// Node 0's steady clock at start, in this node's steady clock.
StageWorker::Clock::time_point shared_epoch(const NodeSetup& setup, RendezvousClient& store) {
  using Clock = StageWorker::Clock;
  if (setup.node == 0) {
    const auto now = Clock::now();
    store.set("epoch", std::to_string(duration_cast<nanoseconds>(now.time_since_epoch()).count()));
    return now;
  }
  const auto text = rendezvous::to_text(store.wait("epoch", setup.rendezvous_timeout));
  return Clock::time_point(nanoseconds(parse_peer_epoch(text)) - setup.steady_clock_offset);
}

// A job of this process alone: one node, every rank here.
NodeSetup one_process(const Job& job) {
  NodeSetup setup;
  setup.node_of_rank.assign(static_cast<std::size_t>(job.plan.stage_actors()), 0);
  return setup;
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

// A run that ends by an exception leaves its peers behind: the hub must not wait for them.
struct AbandonOnError {
  std::shared_ptr<UcxHub> hub;
  int exceptions = std::uncaught_exceptions();
  ~AbandonOnError() {
    if (hub && std::uncaught_exceptions() > exceptions) hub->abandon();
  }
};

// Node k's shard writes report to node 0 through this system: before it ends, every
// write accepted is finished, and none starts later (own_shard_write.hpp).
struct CloseShardWrites {
  NodeShardWrites* writes = nullptr;
  ~CloseShardWrites() {
    if (!writes) return;
    writes->queue().close();
    writes->detach();
  }
};

// Node 0: whatever the other nodes have not reported when this run ends fails, so that
// the checkpoint writer waiting for it ends too.
struct FailPendingShards {
  std::shared_ptr<checkpoint::RemoteShards> book;
  ~FailPendingShards() {
    if (book) book->fail_pending("the job ended before its node reported it");
  }
};

// Why a node that joins a shrunk job is refused (node_directory.hpp's no_grow); empty:
// it is taken in at a boundary fault.grow allows.
// Without buddy copies too: the grow asks the nodes for copies of its boundary's
// snapshots (coordinator_grow.cpp).
std::string no_grow_reason(const JobPlan& plan) {
  if (plan.recovery.grow == GrowPolicy::never) return "fault.grow is never (at_step or at_checkpoint would take it in)";
  return {};
}

struct ReleaseRelay {
  LossRelay& relay;
  ~ReleaseRelay() { relay.release(); }
};

// One process's run of its part of the job. The members are declared in the order they
// must be destroyed in reverse: the actor system first, then what waits for its actors,
// then every actor handle (a handle that outlived the system would keep an actor alive
// forever), the relay, the liveness watch and the UCX hub.
class NodeRun {
 public:
  NodeRun(const Job& given, const NodeSetup& setup, RendezvousClient* store, TrainingObserver* observer)
      : setup_(store ? setup : one_process(given)),
        store_(store),
        observer_(observer),
        shape_(recovery_shape(given.plan, setup_, across())),
        job_(make_job(given.plan, given.services, setup_, shape_, across())) {}

  std::optional<TrainResult> run();

 private:
  bool across() const { return store_ != nullptr; }
  bool node0() const { return setup_.node == 0; }
  // Node k > 0 takes part in electing node 0's successor (fault.leader_failover): with
  // buddy copies, whose standby the successor is (standby_role.hpp). Not a process that
  // joins a running job (a replacement, or a node growing a shrunk one): it knows only the
  // started layout until node 0 takes it in, and one that node 0 refuses sees node 0 go as
  // a leader's loss (it would elect where it should end with the refusal).
  bool fails_over() const {
    return across() && !node0() && !setup_.rejoining && shape_.copies && setup_.store.route &&
           job_->plan.recovery.leader_failover == LeaderFailoverPolicy::automatic;
  }
  // Stages on threads of their own: runtime.stage_threads detached, in one process only.
  bool detached_stages() const { return !across() && job_->plan.detached_stages; }
  void check_rejoin() const;
  void start_system();
  void watch_liveness();
  void connect_peers();
  void spawn_stages();
  void publish_directory();
  void stand_by();
  std::optional<TrainResult> serve_node_k();
  void report_reach(int node);
  LayoutActors gather_stages();
  KeeperActor spawn_keeper(std::shared_ptr<CopiesInFlight> in_flight);
  StageRestarts stage_restarts();
  NodeStages relayout(const Relayout& r);
  TrainResult coordinate(const LayoutActors& layout);
  TrainResult with_remote_weights(TrainResult result);

  const NodeSetup setup_;
  RendezvousClient* const store_;
  TrainingObserver* const observer_;
  const RecoveryShape shape_;
  const std::shared_ptr<const Job> job_;
  std::vector<int> local_ranks_;
  std::shared_ptr<DetachedThreads> detached_;
  caf::actor_system_config system_config_;  // the system refers to it while it lives
  std::unique_ptr<caf::actor_system> system_;
  std::optional<AwaitDetachedThreads> await_actors_;
  CloseShardWrites close_shard_writes_;
  FailPendingShards shard_book_;
  EndActors end_;
  NodeStages mine_;
  // A process that dies is seen through its silence at the store, whatever state its
  // connections are left in. Declared after the system: the relay holds an actor handle.
  LossRelay relay_;
  std::optional<ReleaseRelay> release_relay_;
  std::unique_ptr<LivenessWatch> watch_;
  std::shared_ptr<UcxHub> hub_;
  AbandonOnError abandon_on_error_;
  std::shared_ptr<const StageLinks> links_;  // the layout's at start
  // The layout this node runs now (issue 44's re-plan replaces both): what respawns,
  // node 0's keeper and the final weights' fetch route by.
  struct LiveLayout {
    std::mutex mutex;
    std::shared_ptr<const Job> job;
    std::shared_ptr<const StageLinks> links;
  };
  std::shared_ptr<LiveLayout> live_ = std::make_shared<LiveLayout>();
  std::shared_ptr<CurrentLinks> current_links_ = std::make_shared<CurrentLinks>(nullptr);
  // Spawns a stage actor of `job` for `rank` fenced at the round given (a respawn or a
  // re-plan), as this node spawns its stages.
  std::function<StageActor(std::shared_ptr<const Job>, int, std::shared_ptr<const StageLinks>, std::int64_t)>
      spawn_fenced_;
  caf::weak_actor_ptr watcher_;  // node k's main thread (node_watch.hpp)
  StageWorker::Clock::time_point epoch_;
  caf::actor shard_reports_;
  std::optional<caf::scoped_actor> self_;
  RespawnLocal respawn_local_;
  RebuildEdges rebuild_;
  caf::actor directory_;
  std::vector<caf::actor> directories_;
  // Node k > 0 with buddy copies: whether it stands by for node 0 in the layout it runs
  // now, with the keeper of node 0's copies (standby_role.hpp); null elsewhere.
  std::unique_ptr<StandbyRole> standby_;
  // Node k > 0 with fault.leader_failover: the standby's copy of the store, the route this
  // process's store clients share, the election once node 0 is lost; null elsewhere.
  std::unique_ptr<LeaderFailover> failover_;
};

void NodeRun::check_rejoin() const {
  if (setup_.rejoining && !shape_.rejoin())
    throw std::runtime_error(fmt::format(
        "node {} joins a job that is running already, as a replacement, but this job does not "
        "take replacements ({}): restart the whole job",
        setup_.node, shape_.no_rejoin));
  if (static_cast<int>(setup_.node_of_rank.size()) != job_->plan.stage_actors())
    throw std::logic_error("run_job: node_of_rank does not cover every rank");
}

void NodeRun::start_system() {
  for (int r = 0; r < job_->plan.stage_actors(); ++r)
    if (setup_.node_of_rank[r] == setup_.node) local_ranks_.push_back(r);
  auto& cfg = system_config_;
  // Across processes stages are always scheduled, never detached (runtime.stage_threads
  // does not apply): in CAF 0.17 a detached actor can keep itself alive after it ended,
  // and the actor system's destructor then waits for its thread forever (CAF issue 1196,
  // fixed in 0.18), seen here when a peer process died mid-run. Detached stages own a
  // thread each, and the scheduler runs only the coordinator and the blocking caller;
  // scheduled ones take a worker each besides those two.
  const bool detached = detached_stages();
  if (across()) {
    cfg.load<caf::io::middleman>();  // it has a thread of its own
    add_wire_types(cfg);
  }
  const auto local = local_ranks_.size();
  const std::size_t workers = detached ? 2 : local + 2;
  cfg.set("scheduler.max-threads", workers);
  configure_idle_polling(cfg, *job_, local_ranks_, static_cast<int>(workers), detached);
  detached_ = DetachedThreads::install(cfg);
  system_ = std::make_unique<caf::actor_system>(cfg);
  // Every actor handle lives below this: the system's destructor waits for every actor,
  // and a stage stuck in its compute would keep it waiting: past a minute the system is
  // left alive (detached_threads.hpp).
  await_actors_.emplace(detached_, system_);
  close_shard_writes_.writes = job_->services.shard_writes.get();
  if (shape_.nodes_write_shards && node0()) shard_book_.book = std::make_shared<checkpoint::RemoteShards>();
  mine_ = NodeStages{setup_.node, local_ranks_, {}, {}, {}, {}};
  release_relay_.emplace(ReleaseRelay{relay_});
}

void NodeRun::watch_liveness() {
  LivenessOptions liveness;
  liveness.store = setup_.store;
  liveness.rank = static_cast<std::uint32_t>(setup_.node);
  liveness.world_size = static_cast<std::uint32_t>(setup_.nnodes);
  liveness.interval = setup_.heartbeat_interval;
  liveness.max_silence = setup_.peer_silence;
  liveness.keep_watching = shape_.rejoin();
  // Node 0 decides losses and marks them; another node hears of its own (a freeze of its
  // process longer than peer_silence) instead of waiting on stages node 0 took away.
  liveness.marks_losses = node0();
  if (!node0())
    liveness.on_declared_lost = [this](const std::string& why) {
      if (setup_.on_declared_lost) setup_.on_declared_lost(why);
      relay_.report(caf::make_message(stop_run_atom::value, why), false);
    };
  watch_ = std::make_unique<LivenessWatch>(liveness, [this](const LivenessLoss& loss) {
    bool node0_lost = false;
    auto why = describe_loss(loss, setup_, &node0_lost);
    // The shards a lost node was writing fail now: a stop's checkpoint may be waiting for
    // them on the coordinator's thread, which cannot hear of the loss meanwhile.
    if (shard_book_.book)
      for (auto n : loss.silent_ranks)
        shard_book_.book->fail_node(static_cast<int>(n), setup_.node_of_rank, why);
    if (!shape_.rejoin() && !node0_lost)
      why += fmt::format("; the job takes no replacement for a lost node ({})", shape_.no_rejoin);
    if (!shape_.rejoin() || node0_lost) {
      relay_.report(caf::make_message(stop_run_atom::value, std::move(why)), node0_lost);
      return;
    }
    // The job waits for a replacement: node 0's coordinator decides, the others go on.
    if (!node0()) return;
    for (auto n : loss.silent_ranks) {
      bool ignored = false;
      relay_.report(caf::make_message(node_lost_atom::value, static_cast<int>(n),
                                      describe_loss(LivenessLoss{{n}, loss.detail}, setup_, &ignored)),
                    false);
    }
  });
}

// The channels to the other nodes (UCX, NCCL) and the epoch every node times against.
void NodeRun::connect_peers() {
  UcxOptions ucx;
  ucx.transports = setup_.ucx_transports;
  ucx.detect_peer_failure = ucx_detects_peer_failure(ucx.transports);
  ucx.timeout = setup_.transport_timeout;
  ucx.name = fmt::format("node {}", setup_.node);
  hub_ = std::make_shared<UcxHub>(ucx);
  abandon_on_error_.hub = hub_;
  links_ = connect_channels(*job_, setup_, *store_, hub_);
  epoch_ = shared_epoch(setup_, *store_);
  mine_.ucx_address = ucx_address(*hub_);
}

void NodeRun::spawn_stages() {
  auto& system = *system_;
  if (job_->services.shard_writes) {
    shard_reports_ = system.spawn(shard_reporter, setup_.transport_timeout);
    end_.actors.push_back(shard_reports_);
    job_->services.shard_writes->attach(shard_reports_);
  }
  auto spawn = [&system, detached = detached_stages(), d = detached_](auto&& fun, auto&&... args) {
    if (!detached) return system.spawn(fun, args...);
    auto a = system.spawn<caf::detached>(fun, args...);
    d->spawned();
    return a;
  };
  for (int r : local_ranks_) {
    auto a = spawn(stage_actor, job_, r, epoch_, links_, !setup_.rejoining);
    mine_.actors.push_back(a);
    end_.actors.push_back(caf::actor_cast<caf::actor>(a));
  }
  self_.emplace(system);
  {
    std::lock_guard lock(live_->mutex);
    live_->job = job_;
    live_->links = links_;
  }
  current_links_->set(links_);
  watcher_ = caf::actor_cast<caf::weak_actor_ptr>(self_->ptr());
  spawn_fenced_ = [spawn, epoch = epoch_](std::shared_ptr<const Job> job, int rank,
                                          std::shared_ptr<const StageLinks> links, std::int64_t fence) {
    return StageActor(spawn(restarted_stage_actor, std::move(job), rank, epoch, std::move(links), fence));
  };
  // Replacements of this node's stages, spawned like the originals. In one process the
  // coordinator respawns a failed stage whenever the job recovers in place; across
  // processes where the coordinator (node 0) asks this node's directory, with snapshots.
  // On node k > 0 the main thread, which watches this node's stages, learns of each.
  if (!across() || shape_.snapshots)
    respawn_local_ = [spawn = spawn_fenced_, live = live_, node = setup_.node,
                      watcher = watcher_](int rank, std::int64_t fence) {
      std::shared_ptr<const Job> job;
      std::shared_ptr<const StageLinks> links;
      {
        std::lock_guard lock(live->mutex);
        job = live->job;
        links = live->links;
      }
      auto fresh = spawn(job, rank, links, fence);
      if (auto w = watcher.lock(); w && node != 0)
        caf::anon_send(caf::actor_cast<caf::actor>(w), stage_replaced_atom::value, rank, fresh);
      return fresh;
    };
}

// Issue 44 item 7: with buddy copies, node 0's stages send copies of their snapshots to
// the standby (the lowest other node of the layout), whose keeper this node names in its
// NodeStages when it is that node (at start here, after a re-plan in relayout()).
// With fault.leader_failover every node k > 0 also knows where the standby keeps its copy
// of the store (leader_failover.hpp).
void NodeRun::stand_by() {
  const std::set<int> nodes(setup_.node_of_rank.begin(), setup_.node_of_rank.end());
  if (fails_over()) {
    LeaderFailoverOptions failover;
    failover.node = setup_.node;
    failover.advertise_host = setup_.advertise_host;
    failover.store = setup_.store;
    failover.reach_timeout = setup_.peer_silence + milliseconds(3000);
    failover_ = std::make_unique<LeaderFailover>(failover, *store_);
    failover_->on_layout({nodes.begin(), nodes.end()}, 0);
  }
  if (!across() || !shape_.copies || node0()) return;
  standby_ = std::make_unique<StandbyRole>(setup_.node, 0, [this](std::shared_ptr<CopiesInFlight> in_flight) {
    return spawn_keeper(std::move(in_flight));
  });
  mine_.keeper = standby_->on_layout({nodes.begin(), nodes.end()}, setup_.node_of_rank);
}

// This node's directory, published through the middleman, and a direct CAF connection
// per pair of nodes: node k dials nodes 0 .. k-1 (a replacement dials every other node:
// their connections to it died with its forerunner).
void NodeRun::publish_directory() {
  auto& system = *system_;
  Reconnect reconnect;
  if (shape_.rejoin())
    reconnect = [hub = hub_](int node, const std::vector<std::uint8_t>& address) {
      connect_ucx_peer(*hub, node, address);
    };
  // A recovery of GPU stages gives every NCCL edge a new communicator (RebuildChannels).
  if (shape_.snapshots && has_nccl_edges(*job_, setup_))
    rebuild_ = [job = job_, setup = &setup_, store = store_, links = links_](std::uint32_t generation) {
      rebuild_nccl_edges(*job, *setup, *store, *links, generation);
    };
  directory_ = system.spawn(node_directory, job_->plan.stage_actors(), mine_, reconnect, respawn_local_,
                            rebuild_, node0() ? PeerStop(setup_.peer_stop) : PeerStop(),
                            node0() ? job_->services.progress : nullptr,
                            shape_.rejoin() ? RelayoutLocal([this](const Relayout& r) { return relayout(r); })
                                            : RelayoutLocal(),
                            no_grow_reason(job_->plan),
                            node0() && shape_.rejoin() ? PublishLayoutNodes([store = store_](const std::vector<int>& nodes) {
                              publish_layout_nodes(*store, nodes);
                            })
                                                       : PublishLayoutNodes());
  mine_.directory = directory_;
  end_.actors.push_back(directory_);
  auto port = system.middleman().publish(directory_, 0, setup_.advertise_host.c_str());
  if (!port)
    throw std::runtime_error(fmt::format("cannot publish node {}'s actors on {}: {}", setup_.node,
                                         setup_.advertise_host, system.render(port.error())));
  // [v6::addr]:PORT for IPv6, so that every message that shows it can be read back.
  store_->set(key("caf", setup_.node), rendezvous::host_port(setup_.advertise_host, *port));
  directories_.resize(static_cast<std::size_t>(setup_.nnodes));
  // A node lost for good left its endpoint behind; it dials this node if it joins again.
  const auto present = setup_.rejoining ? running_layout_nodes(*store_) : std::nullopt;
  for (int j = 0; j < setup_.nnodes; ++j) {
    if (j == setup_.node || (j > setup_.node && !setup_.rejoining) || !joiner_dials(present, j)) continue;
    const auto endpoint = rendezvous::to_text(store_->wait(key("caf", j), setup_.rendezvous_timeout));
    const PeerEndpoint at = parse_peer_endpoint(endpoint, j);
    auto remote = system.middleman().remote_actor(at.host, at.port);
    if (!remote)
      throw std::runtime_error(fmt::format("cannot reach node {}'s actors at {}: {}", j, endpoint,
                                           system.render(remote.error())));
    directories_[j] = *remote;
  }
}

// Node k > 0: announces its stages to node 0, then watches them until the coordinator
// ends them.
std::optional<TrainResult> NodeRun::serve_node_k() {
  auto& self = *self_;
  std::string refused;
  self->request(directories_[0], setup_.rendezvous_timeout, mine_)
      .receive([](bool) {}, [&](caf::error& e) { refused = error_text(*system_, e); });
  if (!refused.empty())
    throw std::runtime_error(fmt::format("node 0 did not take this node's stages: {}", refused));
  if (!setup_.rejoining) store_->barrier("stages", setup_.rendezvous_timeout);
  if (failover_) failover_->refresh();  // the standby published its address before the barrier
  relay_.deliver_to(caf::actor_cast<caf::actor>(self.ptr()));
  if (job_->services.progress)
    end_.actors.push_back(system_->spawn(
        progress_reporter, std::shared_ptr<const trace::ProgressBoard>(job_->services.progress),
        local_ranks_, setup_.node, directories_[0], progress_report_interval(job_->plan.watchdog_timeout_s)));
  const auto forward_stop = [&]() -> bool {
    if (failover_) failover_->refresh();  // a re-plan may have moved the standby
    const int signal = setup_.local_stop ? setup_.local_stop() : 0;
    if (signal == 0) return false;
    self->send(directories_[0], stop_request_atom::value, setup_.node, signal);
    fmt::print(stderr, "conveyor train: node {} caught a stop signal: node 0 stops the job at the next step "
                       "boundary it can checkpoint\n", setup_.node);
    return true;
  };
  try {
    // Once node 0 is gone nothing can end these stages normally: a short grace covers
    // exits still in flight behind its last messages.
    watch_stages(self, mine_, setup_.node_of_rank, directories_[0], relay_,
                 std::min(setup_.transport_timeout, milliseconds(2000)),
                 static_cast<bool>(respawn_local_), forward_stop, setup_.stop_poll, setup_.peer_silence,
                 failover_ != nullptr);
  } catch (const LeaderLost& lost) {
    // Node 0's copies are all this node will get: what it holds now, without waiting.
    const auto held = standby_ ? standby_->holdings(*job_->services.snapshots, milliseconds(0)) : std::string();
    if (const int next = failover_->election().successor; next >= 0 && next != setup_.node)
      report_reach(next);  // before the store's check, after which the successor ends
    const auto outcome = failover_->fail_over(lost.what(), held);
    await_actors_->limit_wait(kFailedJobGrace);
    throw std::runtime_error(outcome);
  } catch (...) {
    await_actors_->limit_wait(kFailedJobGrace);
    throw;
  }
  failover_.reset();  // the job ended in order: node 0 leaves now, its store with it
  if (job_->services.shard_writes) {
    // The last checkpoint's shards may still be on their way: node 0 waits for them
    // before it ends the job, so this node leaves only once they are written and noted.
    job_->services.shard_writes->queue().close();
    self->request(shard_reports_, caf::infinite, flush_shard_reports_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  }
  // Node 0's last snapshot's copies are sent as the run ends: a short wait lets them come.
  if (standby_) {
    const auto wait = std::min(setup_.transport_timeout, milliseconds(2000));
    if (const auto line = standby_->summary(*job_->services.snapshots, wait); !line.empty())
      fmt::print(stderr, "conveyor train: {}\n", line);
  }
  watch_->stop();
  hub_->drain_sends(setup_.transport_timeout);
  return std::nullopt;
}

// After node 0's loss: whether node `node`'s directory answers over the CAF connection
// this node dialed at start (node k dials every lower node), which a new leader on
// `node` would need; one line either way.
void NodeRun::report_reach(int node) {
  if (node >= static_cast<int>(directories_.size()) || !directories_[node]) {
    fmt::print(stderr, "conveyor train: node {} holds no connection to node {}'s directory\n", setup_.node, node);
    return;
  }
  std::string answer;
  (*self_)->request(directories_[node], std::min(setup_.transport_timeout, milliseconds(2000)), reach_atom::value)
      .receive([&](int n) { answer = fmt::format("answered (node {})", n); },
               [&](caf::error& e) { answer = "did not answer: " + error_text(*system_, e); });
  fmt::print(stderr, "conveyor train: node {}'s directory, over the connection node {} dialed at start, {}\n", node,
             setup_.node, answer);
}

// Every stage actor of the job, by rank: this process's own, or across processes those
// node 0's directory gathered once every node announced its stages (and the standby's
// keeper, when a node stands by).
LayoutActors NodeRun::gather_stages() {
  if (!across()) return LayoutActors{mine_.actors, {}, -1};
  store_->barrier("stages", setup_.rendezvous_timeout);  // names the nodes that never announced
  store_->set(kJobRunningKey, "1");  // a node that joins from now on is a replacement
  LayoutActors layout;
  std::string failed;
  (*self_)->request(directory_, setup_.rendezvous_timeout, stages_atom::value)
      .receive([&](LayoutActors& all) { layout = std::move(all); },
               [&](caf::error& e) { failed = error_text(*system_, e); });
  if (!failed.empty()) throw std::runtime_error("gathering the stage actors: " + failed);
  return layout;
}

// A snapshot keeper over this node's store: node 0's, or the standby's.
KeeperActor NodeRun::spawn_keeper(std::shared_ptr<CopiesInFlight> in_flight) {
  auto keeper = system_->spawn(snapshot_keeper, job_->services.snapshots,
                               std::shared_ptr<const CurrentLinks>(current_links_), shard_book_.book,
                               std::move(in_flight));
  end_.actors.push_back(caf::actor_cast<caf::actor>(keeper));
  return keeper;
}

StageRestarts NodeRun::stage_restarts() {
  StageRestarts restarts;
  restarts.respawn = respawn_local_;
  if (!across()) return restarts;
  restarts.node_of_rank = setup_.node_of_rank;
  if (!shape_.snapshots) return restarts;
  restarts.directory = directory_;
  restarts.rebuild_channels = static_cast<bool>(rebuild_);  // the job has NCCL edges
  restarts.remote_markers = !shape_.copies;
  // Node 0's keeper takes the other nodes' copies: every snapshot's with buddy copies,
  // else those a checkpoint or a grow asks for (CopySnapshot).
  restarts.keeper = spawn_keeper(nullptr);
  restarts.remote_shards = shard_book_.book;
  // A copy's tensors may each take up to transport.timeout_s.
  restarts.copy_wait = std::max<milliseconds>(restarts.copy_wait, 2 * setup_.transport_timeout);
  if (shape_.rejoin()) restarts.rejoin_timeout = setup_.rejoin_timeout;
  restarts.no_rejoin = shape_.no_rejoin;
  return restarts;
}

// Issue 44's re-plan, on the directory's thread (node_directory.hpp): this node's actors of
// the layout of the nodes r.nodes, which every node computes alike (choose_layout) from
// the plan the job started with. The snapshot store of a node k > 0 starts over (its
// snapshots are the old actors'; node 0's coordinator cut what it needs before it asked).
// Node 0's store is the coordinator's: it is reset there once the new actors took over
// (coordinator_relayout.cpp), so that a move abandoned before (a node lost during it)
// leaves step S of the old layout in it to move again from.
NodeStages NodeRun::relayout(const Relayout& r) {
  if (job_->services.fault && job_->services.fault->exit_in_relayout())
    die_by_injected_exit(fmt::format("node {}: fault.inject exit: this process dies as it moves onto the layout "
                                     "of nodes [{}] (layout generation {})",
                                     setup_.node, fmt::join(r.nodes, ", "), r.generation));
  const ElasticChoice choice = choose_layout(job_->plan, setup_.node_of_rank, r.nodes);
  if (!choice.plan) throw std::runtime_error(choice.replan.reason);
  auto job = std::make_shared<const Job>(Job{*choice.plan, job_->services});
  auto links = std::make_shared<StageLinks>(*current_links_->get());
  links->node_of_rank = choice.node_of_rank;
  if (job->services.snapshots && !node0()) job->services.snapshots->reset(job->plan.stage_actors());
  // Node 0's watchdog board: the ranks beyond the new layout's are idle for good (this
  // thread, the directory's, wrote the other nodes' entries; their reports are dropped now).
  if (node0() && job->services.progress)
    for (int rank = job->plan.stage_actors(); rank < job->services.progress->stages(); ++rank)
      job->services.progress->stage(rank).publish(trace::StageState::idle, 0, 0, false, 0, trace::now_ns());
  {
    std::lock_guard lock(live_->mutex);
    live_->job = job;
    live_->links = links;
  }
  current_links_->set(links);
  // Before any node is told the layout is running: a process that joins from now on dials these.
  if (node0() && store_) publish_layout_nodes(*store_, r.nodes);
  NodeStages mine{setup_.node, {}, {}, {}, {}, {}};
  for (int rank = 0; rank < job->plan.stage_actors(); ++rank) {
    if (choice.node_of_rank[static_cast<std::size_t>(rank)] != setup_.node) continue;
    auto fresh = spawn_fenced_(job, rank, links, r.round_fence);
    end_.actors.push_back(caf::actor_cast<caf::actor>(fresh));
    if (auto w = watcher_.lock(); w && !node0())
      caf::anon_send(caf::actor_cast<caf::actor>(w), stage_relaid_atom::value, rank, fresh);
    mine.ranks.push_back(rank);
    mine.actors.push_back(fresh);
  }
  if (mine.ranks.empty() && !node0())
    if (auto w = watcher_.lock()) caf::anon_send(caf::actor_cast<caf::actor>(w), stage_idle_atom::value);
  // The standby of the new layout names its keeper (node 1's lost: the next lowest node).
  if (standby_) mine.keeper = standby_->on_layout(r.nodes, choice.node_of_rank);
  // ... and starts its copy of the store, which the node that stood by before stops.
  if (failover_) try {
      failover_->on_layout(r.nodes, r.generation);
    } catch (const std::exception& e) {
      fmt::print(stderr, "conveyor train: node {} cannot stand by for node 0 in layout generation {}: {}\n",
                 setup_.node, r.generation, e.what());
    }
  fmt::print(stderr, "conveyor train: node {} moves onto {} (layout generation {}): stage(s) [{}] here\n",
             setup_.node, describe_shape(job->plan.replicas, static_cast<int>(job->plan.placement.ranks.size())),
             r.generation, fmt::join(mine.ranks, ", "));
  return mine;
}

// Node 0: the coordinator drives every stage to the end of the run.
TrainResult NodeRun::coordinate(const LayoutActors& layout) {
  StageRestarts restarts = stage_restarts();
  restarts.standby_keeper = layout.standby_keeper;
  restarts.standby_node = layout.standby_node;
  const auto& stages = layout.stages;
  RunWatchdog watchdog;
  watchdog.wire(restarts);
  auto coordinator = system_->spawn(coordinator_actor, job_, stages, observer_, restarts);
  end_.actors.push_back(caf::actor_cast<caf::actor>(coordinator));
  if (across()) {
    (*self_)->send(directory_, coordinator_atom::value, coordinator);
    relay_.deliver_to(caf::actor_cast<caf::actor>(coordinator));
  }
  watchdog.start(job_, coordinator);
  TrainResult result;
  std::string failed;
  (*self_)->request(coordinator, caf::infinite, train_atom::value)
      .receive([&](TrainResult& r) { result = std::move(r); },
               [&](caf::error& e) { failed = error_text(*system_, e); });
  const bool hung = watchdog.stop();
  // The shards the other nodes are still writing (the last checkpoint's) are reported to
  // the keeper, which ends with this run: the writer waits for them, so must this.
  const auto& book = shard_book_.book;
  if (const auto pending = book ? book->pending() : 0; pending > 0 && failed.empty() && !hung) {
    fmt::print(stderr, "conveyor train: waiting for the other nodes to write {} shard(s) of the last checkpoint\n",
               pending);
    if (!book->wait_all(job_->plan.remote_shard_timeout))
      fmt::print(stderr, "conveyor train: the other nodes did not report every shard within "
                         "checkpoint.remote_timeout_s\n");
  }
  if (watch_) watch_->stop();  // the other nodes leave now
  if (hung) {
    // The stage the diagnosis names may be stuck in its compute for good: wait for the
    // threads as long as the watchdog's grace period, not the default minute.
    await_actors_->limit_wait(across() ? kFailedJobGrace
                                       : milliseconds(static_cast<std::int64_t>(
                                             1000 * std::max(5.0, job_->plan.watchdog_timeout_s))));
    throw HangError(watchdog.diagnosis());
  }
  if (!failed.empty()) {
    if (across()) await_actors_->limit_wait(kFailedJobGrace);
    throw std::runtime_error(failed);
  }
  return result;
}

// Node 0's result holds handles of the other nodes' tensors: their bytes, then the check
// the coordinator leaves to this point when the replicas' bytes were still on their way
// (coordinator_actor.cpp).
TrainResult NodeRun::with_remote_weights(TrainResult result) {
  if (!across()) return result;
  if (result.replica_weights.empty()) {
    fetch_remote_weights(result.weights, *current_links_->get(), setup_.transport_timeout);
    return result;
  }
  for (auto& replica : result.replica_weights)
    fetch_remote_weights(replica, *current_links_->get(), setup_.transport_timeout);
  if (auto diff = replica_difference(result.replica_weights))
    throw std::runtime_error("data-parallel replicas ended with different weights: " + *diff);
  result.weights = result.replica_weights.front();
  return result;
}

std::optional<TrainResult> NodeRun::run() {
  check_rejoin();
  set_cpu_kernel_threads(job_->plan.threads_per_stage);  // before any stage computes
  start_system();
  if (across()) {
    watch_liveness();
    connect_peers();
  } else {
    epoch_ = StageWorker::Clock::now();
  }
  spawn_stages();
  stand_by();
  if (across()) {
    publish_directory();
    if (!node0()) return serve_node_k();
  }
  return with_remote_weights(coordinate(gather_stages()));
}

}  // namespace

std::optional<TrainResult> run_job(const Job& job, const NodeSetup& setup, RendezvousClient* store,
                                   TrainingObserver* observer) {
  NodeRun run(job, setup, store, observer);
  return run.run();
}

}  // namespace conveyor
