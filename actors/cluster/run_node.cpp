#include "actors/cluster/run_node.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>

#include "actors/checkpoint/remote_shards.hpp"
#include "actors/cluster/channel_setup.hpp"
#include "actors/cluster/loss_relay.hpp"
#include "actors/cluster/node_directory.hpp"
#include "actors/cluster/own_shard_write.hpp"
#include "actors/cluster/peer_values.hpp"
#include "actors/cluster/progress_reporter.hpp"
#include "actors/cluster/remote_weights.hpp"
#include "actors/cluster/snapshot_keeper.hpp"
#include "actors/cluster/stage_links.hpp"
#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/coordinator/job_failure.hpp"
#include "actors/coordinator/replica_weights.hpp"
#include "actors/coordinator/stage_end_text.hpp"
#include "actors/error_text.hpp"
#include "actors/runtime/detached_threads.hpp"
#include "actors/runtime/hang_watchdog.hpp"
#include "actors/runtime/replica_groups.hpp"
#include "actors/runtime/scheduler_polling.hpp"
#include "actors/stage/stage_actor.hpp"
#include "actors/trace/hang_error.hpp"
#include "kernels/cpu/threads.hpp"
#include "transport/rendezvous/error.hpp"
#include "transport/rendezvous/liveness_watch.hpp"
#include "transport/ucx/ucx_hub.hpp"

namespace conveyor {
namespace {

using namespace std::chrono;

std::string key(const char* what, int node) { return fmt::format("{}/{}", what, node); }

std::string node_name(int node) { return fmt::format("node {}", node); }

// Sends an exit to every actor it holds when the run ends, well or not, so that the
// actor system's destructor (which waits for every actor) never waits forever.
struct EndActors {
  std::vector<caf::actor> actors;
  ~EndActors() {
    for (auto& a : actors)
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

// A failed job's stages may be blocked in a collective with a lost node's replica: a Gloo
// bucket on a frozen peer (its sockets open) waits out its whole timeout, transport.timeout_s,
// and the actor system would wait for it (a frozen node 1 of 2 replicas failed node 0 after
// 64 s instead of 11). Their results are not used: past this grace the system is abandoned
// and apps/main.cpp ends the process with _Exit (detached_threads.hpp).
constexpr milliseconds kFailedJobGrace{5000};

bool normal_end(const caf::error& e) {
  return !e || e == caf::exit_reason::user_shutdown || e == caf::exit_reason::normal;
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
  return Clock::time_point(nanoseconds(parse_peer_epoch(text)) - setup.steady_clock_offset);
}

/// To node k's main thread: its directory respawned stage `rank` as this actor.
using stage_replaced_atom = caf::atom_constant<caf::atom("replaced")>;

// Node k > 0: waits until its stages are down (the coordinator ends them). Throws naming
// a local stage that failed (and was not replaced), or a node that was lost (`relay`:
// the liveness watch).
// A stop this node caught is forwarded once to node 0 (`forward_stop`, polled every
// `poll`); the coordinator then ends the stages as at any end.
void watch_stages(caf::scoped_actor& self, const NodeStages& mine, const std::vector<int>& node_of_rank,
                  const caf::actor& node0,
                  const LossRelay& relay, milliseconds grace, bool respawns,
                  const std::function<bool()>& forward_stop, milliseconds poll,
                  milliseconds peer_silence) {
  std::map<caf::actor_addr, int> rank_of;  // every stage actor of this node, replacements too
  for (std::size_t i = 0; i < mine.actors.size(); ++i) {
    self->monitor(mine.actors[i]);
    rank_of[mine.actors[i].address()] = mine.ranks[i];
  }
  self->monitor(node0);
  std::size_t alive = mine.actors.size();
  bool node0_gone = false, waited_out = false;
  std::string lost;
  // A failure counts unless a replacement followed (or came first: the two messages
  // come from different actors, in no fixed order).
  std::map<int, int> unresolved;  // rank → failures − replacements
  std::map<int, std::string> failed;
  std::map<int, std::string> job_failure;  // rank → node 0's reason for ending it
  auto on_down = [&](caf::down_msg& d) {
    if (d.source == node0.address()) {
      node0_gone = true;
      return;
    }
    auto it = rank_of.find(d.source);
    if (it == rank_of.end()) return;
    --alive;
    if (normal_end(d.reason)) return;
    if (auto why = job_failure_reason(d.reason)) {  // node 0 ended it: the job failed there
      job_failure.try_emplace(it->second, *why);
      return;
    }
    ++unresolved[it->second];
    failed.try_emplace(it->second, fmt::format("stage {} failed: {}", it->second,
                                               stage_end_text(self->system(), d.reason, it->second,
                                                              node_of_rank, mine.node, peer_silence)));
  };
  auto on_replaced = [&](stage_replaced_atom, int rank, caf::actor& fresh) {
    self->monitor(fresh);
    rank_of[fresh.address()] = rank;
    ++alive;
    --unresolved[rank];
  };
  auto on_lost = [&](stop_run_atom, std::string& why) {
    lost = std::move(why);
    node0_gone = true;  // node 0 ends the stages if it can; the grace bounds the wait
  };
  // A failed stage may come back (node 0's coordinator has this node respawn it): with
  // respawns, wait for that as long as node 0 is there, even with no stage alive.
  auto waiting_for_replacement = [&] {
    if (!respawns) return false;
    for (const auto& [rank, n] : unresolved)
      if (n > 0) return true;
    return false;
  };
  bool forwarded = false;
  auto poll_stop = [&] {
    if (!forwarded && forward_stop) forwarded = forward_stop();
  };
  while ((alive > 0 || waiting_for_replacement()) && !waited_out) {
    if (!node0_gone)
      self->receive(on_down, on_replaced, on_lost, caf::after(poll) >> poll_stop);
    else
      self->receive(on_down, on_replaced, on_lost,
                    caf::after(grace) >> [&] { waited_out = true; });
  }
  for (const auto& [rank, n] : unresolved)
    if (n > 0) throw std::runtime_error(failed.at(rank));
  // Ended in order, but because the job failed: this node fails too, with node 0's reason.
  if (!job_failure.empty())
    throw std::runtime_error(fmt::format("node 0 ended stage {} because the job failed there: {}",
                                         job_failure.begin()->first, job_failure.begin()->second));
  // Stages still alive end when this throws (EndActors), as the hub is abandoned.
  // Node 0 leaving right after ending the stages is the normal end; another node lost
  // is a failed job even when node 0 then ended the stages in order.
  if (!lost.empty() && (waited_out || !relay.node0_lost())) throw std::runtime_error(lost);
  if (waited_out)
    throw std::runtime_error(fmt::format(
        "node 0 ended or became unreachable while {} stage(s) of this node were still running",
        alive));
}

// What the loss of `loss` means for this node, in words naming nodes and stages.
std::string describe_loss(const LivenessLoss& loss, const NodeSetup& setup, bool* node0_lost) {
  if (loss.silent_ranks.empty()) {
    *node0_lost = true;
    return fmt::format("node 0 ended or became unreachable (its rendezvous store: {})", loss.detail);
  }
  *node0_lost = loss.silent_ranks.front() == 0;
  std::vector<int> stages;
  for (int r = 0; r < static_cast<int>(setup.node_of_rank.size()); ++r)
    for (auto n : loss.silent_ranks)
      if (setup.node_of_rank[r] == static_cast<int>(n)) stages.push_back(r);
  return fmt::format("{} {} failed: node {} stopped responding ({})",
                     stages.size() == 1 ? "stage" : "stages", fmt::join(stages, ", "),
                     fmt::join(loss.silent_ranks, ", "), loss.detail);
}

bool all_cpu(const TrainingJob& job) {
  for (const auto& r : job.placement.ranks)
    if (!r.device.is_cpu()) return false;
  return true;
}

// Buddy copies of snapshots on node 0 (fault.buddy_copies), and with them the rejoin of a
// lost process, cover host-memory stages: a GPU stage's state is too large to copy every
// step. Without them stages recover in place (GPU stages' NCCL edges rebuilt) from their
// own process's snapshots, and a checkpoint asks for copies of the step it writes.
bool buddy_copies(const TrainingJob& job) {
  switch (job.recovery.buddy_copies) {
    case BuddyCopies::off: return false;
    case BuddyCopies::automatic: return all_cpu(job);
    case BuddyCopies::on:
      if (!all_cpu(job))
        throw std::invalid_argument(
            "fault.buddy_copies: on needs every stage on the CPU (node 0 keeps copies of "
            "host-memory stages only)");
      return true;
  }
  return false;
}

bool keeps_snapshots(const TrainingJob& job) {
  return job.recovery.snapshot_every > 0 &&
         (job.recovery.policy == FaultPolicy::restart || job.on_nan == NanPolicy::rollback);
}

// Why a lost node k > 0 cannot be replaced in the running job (its replacement rejoins
// and restores node 0's copies of its stages' snapshots, or without them every stage goes
// back to the newest checkpoint); empty when it can.
std::string no_rejoin_reason(const TrainingJob& job, const NodeSetup& setup, bool snapshots,
                             bool copies) {
  if (setup.nnodes <= 1) return "it runs in one process";
  if (job.recovery.policy != FaultPolicy::restart) return "fault.policy is abort";
  if (!snapshots) return "fault.snapshot_every is 0: no snapshots to restore";
  if (!copies && !all_cpu(job))
    return "node 0 keeps no copy of GPU stages' snapshots (fault.buddy_copies), and a "
           "replacement process does not join the NCCL edges yet";
  if (!copies && job.checkpoint_every <= 0)
    return "node 0 keeps no copy of the other nodes' snapshots (fault.buddy_copies is off) "
           "and no checkpoint is written to go back to (checkpoint.every is 0)";
  if (setup.rejoin_timeout.count() <= 0) return "fault.rejoin_timeout_s is 0";
  return "";
}

}  // namespace

std::optional<TrainResult> run_node(const TrainingJob& job_in, const NodeSetup& setup,
                                    RendezvousClient& store, TrainingObserver* observer) {
  TrainingJob resolved = job_in;
  const int ranks = resolved.stage_actors();  // every replica's stages (replica-major)
  const bool snapshots = keeps_snapshots(resolved);
  const bool copies = snapshots && buddy_copies(resolved);  // node 0 keeps every node's snapshots
  resolved.recovery.buddy_copies = copies ? BuddyCopies::on : BuddyCopies::off;  // for the stages
  // With copies, node 0 keeps one more than the minimum (the copies of other nodes'
  // snapshots arrive a little after its own stages' snapshots) and the others a margin
  // beyond that. Without (GPU stages: node 0 notes their steps as they reply, no lag) the
  // minimum: a GPU stage's snapshot is its whole state in pinned host memory.
  if (snapshots && !resolved.snapshots)
    resolved.snapshots =
        std::make_shared<SnapshotStore>(ranks, !copies ? 2 : setup.node == 0 ? 3 : 4);
  const std::string no_rejoin = no_rejoin_reason(resolved, setup, snapshots, copies);
  const bool rejoin = no_rejoin.empty();
  if (setup.rejoining && !rejoin)
    throw std::runtime_error(fmt::format(
        "node {} joins a job that is running already, as a replacement, but this job does not "
        "take replacements ({}): restart the whole job",
        setup.node, no_rejoin));
  // Data parallelism: each stage's replicas, on whichever nodes, average their gradients
  // in a Gloo group that forms over the job's store (replica_groups.hpp); so do the two
  // holders of the tied embedding (model.tie_embeddings). A stage actor joins its groups
  // as it starts; a scheduler thread per local stage lets all of them wait.
  if ((resolved.replicas > 1 || resolved.model.tie_embeddings) && !resolved.replica_groups) {
    RendezvousClientOptions groups_store = setup.store;
    groups_store.connect_timeout = setup.rendezvous_timeout;
    groups_store.io_timeout = std::chrono::seconds(10);
    resolved.replica_groups = std::make_shared<ReplicaGroups>(
        resolved.replicas,
        milliseconds(static_cast<std::int64_t>(resolved.collective_timeout_s * 1000)),
        groups_store, setup.advertise_host);
  }
  // The hang watchdog runs on node 0 over every rank: this node's stages publish here, and
  // node k > 0 reports its own to node 0 (progress_reporter.hpp).
  if (resolved.watchdog_timeout_s > 0 && !resolved.progress)
    resolved.progress = std::make_shared<trace::ProgressBoard>(ranks);
  // checkpoint.writers every_node: this node writes its own stages' shards (node k > 0),
  // or keeps the book of those the others write (node 0).
  const bool nodes_write = resolved.nodes_write_shards && snapshots && setup.nnodes > 1;
  if (nodes_write && setup.node != 0) resolved.shard_writes = std::make_shared<NodeShardWrites>();
  auto job = std::make_shared<const TrainingJob>(std::move(resolved));
  set_cpu_kernel_threads(job->threads_per_stage);
  if (static_cast<int>(setup.node_of_rank.size()) != ranks)
    throw std::logic_error("run_node: node_of_rank does not cover every rank");

  std::vector<int> local_ranks;
  for (int r = 0; r < ranks; ++r)
    if (setup.node_of_rank[r] == setup.node) local_ranks.push_back(r);

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  add_wire_types(cfg);
  // Stages are always scheduled here, never detached (runtime.stage_threads does not
  // apply): in CAF 0.17 a detached actor can keep itself alive after it ended, and the
  // actor system's destructor then waits for its thread forever (CAF issue 1196, fixed in
  // 0.18) — seen here when a peer process died mid-run. One scheduler thread per local
  // stage, plus the coordinator's and the caller's; the middleman has a thread of its own.
  const auto local = local_ranks.size();
  cfg.set("scheduler.max-threads", local + 2);
  configure_idle_polling(cfg, *job, local_ranks, static_cast<int>(local + 2), /*detached=*/false);
  const auto detached = DetachedThreads::install(cfg);  // none are spawned: counts stay 0
  auto system_owner = std::make_unique<caf::actor_system>(cfg);
  caf::actor_system& system = *system_owner;
  // Every actor handle lives below this line: the system's destructor waits for every
  // actor, and a handle that outlived it would keep one alive forever. A stage stuck in
  // its compute would too: past a minute the system is left alive (detached_threads.hpp).
  AwaitDetachedThreads await_actors{detached, system_owner};
  // Node k's shard writes report to node 0 through this system: before it ends, every
  // write accepted is finished, and none starts later (own_shard_write.hpp).
  struct CloseShardWrites {
    NodeShardWrites* writes;
    ~CloseShardWrites() {
      if (!writes) return;
      writes->queue().close();
      writes->detach();
    }
  } close_shard_writes{job->shard_writes.get()};
  // Node 0: whatever the other nodes have not reported when this run ends fails, so that
  // the checkpoint writer waiting for it ends too.
  auto shard_book = nodes_write && setup.node == 0 ? std::make_shared<checkpoint::RemoteShards>() : nullptr;
  struct FailPendingShards {
    checkpoint::RemoteShards* book;
    ~FailPendingShards() {
      if (book) book->fail_pending("the job ended before its node reported it");
    }
  } fail_pending_shards{shard_book.get()};
  EndActors end;
  NodeStages mine{setup.node, local_ranks, {}, {}, {}};
  // A process that dies is seen through its silence at the store, whatever state its
  // connections are left in. Declared after the system: the relay holds an actor handle.
  LossRelay relay;
  struct ReleaseRelay {
    LossRelay& r;
    ~ReleaseRelay() { r.release(); }
  } release_relay{relay};
  LivenessOptions liveness;
  liveness.store = setup.store;
  liveness.rank = static_cast<std::uint32_t>(setup.node);
  liveness.world_size = static_cast<std::uint32_t>(setup.nnodes);
  liveness.interval = setup.heartbeat_interval;
  liveness.max_silence = setup.peer_silence;
  liveness.keep_watching = rejoin;
  // Node 0 decides losses and marks them; another node hears of its own (a freeze of its
  // process longer than peer_silence) instead of waiting on stages node 0 took away.
  liveness.marks_losses = setup.node == 0;
  if (setup.node != 0)
    liveness.on_declared_lost = [&relay, &setup](const std::string& why) {
      if (setup.on_declared_lost) setup.on_declared_lost(why);
      relay.report(caf::make_message(stop_run_atom::value, why), false);
    };
  LivenessWatch watch(liveness, [&relay, &setup, rejoin, no_rejoin, shard_book](const LivenessLoss& loss) {
    bool node0_lost = false;
    auto why = describe_loss(loss, setup, &node0_lost);
    // The shards a lost node was writing fail now: a stop's checkpoint may be waiting for
    // them on the coordinator's thread, which cannot hear of the loss meanwhile.
    if (shard_book)
      for (auto n : loss.silent_ranks) shard_book->fail_node(static_cast<int>(n), setup.node_of_rank, why);
    if (!rejoin && !node0_lost)
      why += fmt::format("; the job takes no replacement for a lost node ({})", no_rejoin);
    if (!rejoin || node0_lost) {
      relay.report(caf::make_message(stop_run_atom::value, std::move(why)), node0_lost);
      return;
    }
    // The job waits for a replacement: node 0's coordinator decides, the others go on.
    if (setup.node != 0) return;
    for (auto n : loss.silent_ranks) {
      bool ignored = false;
      relay.report(caf::make_message(node_lost_atom::value, static_cast<int>(n),
                                     describe_loss(LivenessLoss{{n}, loss.detail}, setup, &ignored)),
                   false);
    }
  });

  UcxOptions ucx;
  ucx.transports = setup.ucx_transports;
  ucx.detect_peer_failure = ucx_detects_peer_failure(ucx.transports);
  ucx.timeout = setup.transport_timeout;
  ucx.name = node_name(setup.node);
  auto hub = std::make_shared<UcxHub>(ucx);
  AbandonOnError abandon_on_error{hub};
  std::shared_ptr<const StageLinks> links = connect_channels(*job, setup, store, hub);
  const auto epoch = shared_epoch(setup, store);
  mine.ucx_address = ucx_address(*hub);

  caf::actor shard_reports;
  if (job->shard_writes) {
    shard_reports = system.spawn(shard_reporter, setup.transport_timeout);
    end.actors.push_back(shard_reports);
    job->shard_writes->attach(shard_reports);
  }
  for (int r : local_ranks) {
    auto a = system.spawn(linked_stage_actor, job, r, epoch, links, !setup.rejoining);
    mine.actors.push_back(a);
    end.actors.push_back(a);
  }
  Reconnect reconnect;
  if (rejoin)
    reconnect = [hub](int node, const std::vector<std::uint8_t>& address) {
      connect_ucx_peer(*hub, node, address);
    };
  // Replacements of this node's stages that fail while the process lives on: spawned
  // here, but where the coordinator (node 0) asks for them (RespawnStage).
  // On node k > 0 the main thread, which watches this node's stages, learns of each.
  caf::scoped_actor self{system};
  RespawnLocal respawn_local;
  if (snapshots)
    respawn_local = [&system, job, epoch, links, node = setup.node,
                     watcher = caf::actor_cast<caf::weak_actor_ptr>(self.ptr())](int rank, std::int64_t fence) {
      auto fresh = system.spawn(restarted_linked_stage_actor, job, rank, epoch, links, fence);
      if (auto w = watcher.lock(); w && node != 0)
        caf::anon_send(caf::actor_cast<caf::actor>(w), stage_replaced_atom::value, rank, fresh);
      return fresh;
    };
  // A recovery of GPU stages gives every NCCL edge a new communicator (RebuildChannels).
  RebuildEdges rebuild;
  if (snapshots && has_nccl_edges(*job, setup))
    rebuild = [job, &setup, &store, links](std::uint32_t generation) {
      rebuild_nccl_edges(*job, setup, store, *links, generation);
    };
  auto directory = system.spawn(node_directory, ranks, mine, reconnect, respawn_local, rebuild,
                                setup.node == 0 ? PeerStop(setup.peer_stop) : PeerStop(),
                                setup.node == 0 ? job->progress : nullptr);
  mine.directory = directory;
  end.actors.push_back(directory);
  auto port = system.middleman().publish(directory, 0, setup.advertise_host.c_str());
  if (!port)
    throw std::runtime_error(fmt::format("cannot publish node {}'s actors on {}: {}", setup.node,
                                         setup.advertise_host, system.render(port.error())));
  // [v6::addr]:PORT for IPv6, so that every message that shows it can be read back.
  store.set(key("caf", setup.node), rendezvous::host_port(setup.advertise_host, *port));

  // One direct CAF connection per pair of nodes: node k dials nodes 0 .. k-1 (a
  // replacement dials every other node: their connections to it died with its forerunner).
  std::vector<caf::actor> directories(setup.nnodes);
  for (int j = 0; j < setup.nnodes; ++j) {
    if (j == setup.node || (j > setup.node && !setup.rejoining)) continue;
    const auto endpoint = rendezvous::to_text(store.wait(key("caf", j), setup.rendezvous_timeout));
    const PeerEndpoint at = parse_peer_endpoint(endpoint, j);
    auto remote = system.middleman().remote_actor(at.host, at.port);
    if (!remote)
      throw std::runtime_error(fmt::format("cannot reach node {}'s actors at {}: {}", j, endpoint,
                                           system.render(remote.error())));
    directories[j] = *remote;
  }

  const auto io = setup.rendezvous_timeout;
  if (setup.node != 0) {
    std::string refused;
    self->request(directories[0], io, mine)
        .receive([](bool) {},
                 [&](caf::error& e) { refused = error_text(system, e); });
    if (!refused.empty())
      throw std::runtime_error(fmt::format("node 0 did not take this node's stages: {}", refused));
    if (!setup.rejoining) store.barrier("stages", setup.rendezvous_timeout);
    relay.deliver_to(caf::actor_cast<caf::actor>(self.ptr()));
    if (job->progress)
      end.actors.push_back(system.spawn(progress_reporter, std::shared_ptr<const trace::ProgressBoard>(job->progress),
                                        local_ranks, setup.node, directories[0],
                                        progress_report_interval(job->watchdog_timeout_s)));
    // Once node 0 is gone nothing can end these stages normally: a short grace covers
    // exits still in flight behind its last messages.
    const auto forward_stop = [&]() -> bool {
      const int signal = setup.local_stop ? setup.local_stop() : 0;
      if (signal == 0) return false;
      self->send(directories[0], stop_request_atom::value, setup.node, signal);
      fmt::print(stderr, "conveyor train: node {} caught a stop signal: node 0 stops the job at the next step "
                         "boundary it can checkpoint\n", setup.node);
      return true;
    };
    try {
      watch_stages(self, mine, setup.node_of_rank, directories[0], relay,
                   std::min(setup.transport_timeout, milliseconds(2000)),
                   static_cast<bool>(respawn_local), forward_stop, setup.stop_poll,
                   setup.peer_silence);
    } catch (...) {
      await_actors.limit_wait(kFailedJobGrace);
      throw;
    }
    if (job->shard_writes) {
      // The last checkpoint's shards may still be on their way: node 0 waits for them
      // before it ends the job, so this node leaves only once they are written and noted.
      job->shard_writes->queue().close();
      self->request(shard_reports, caf::infinite, flush_shard_reports_atom::value).receive([](bool) {}, [](caf::error&) {});
    }
    watch.stop();
    hub->drain_sends(setup.transport_timeout);
    return std::nullopt;
  }

  store.barrier("stages", setup.rendezvous_timeout);  // names the nodes that never announced
  store.set(kJobRunningKey, "1");  // a node that joins from now on is a replacement
  std::vector<caf::actor> stages;
  std::string failed;
  self->request(directory, io, stages_atom::value)
      .receive([&](std::vector<caf::actor>& all) { stages = std::move(all); },
               [&](caf::error& e) { failed = error_text(system, e); });
  if (!failed.empty()) throw std::runtime_error("gathering the stage actors: " + failed);

  StageRestarts restarts;
  restarts.node_of_rank = setup.node_of_rank;
  if (snapshots) {
    restarts.respawn = respawn_local;
    restarts.directory = directory;
    restarts.rebuild_channels = static_cast<bool>(rebuild);  // the job has NCCL edges
    restarts.remote_markers = !copies;
    // Node 0's keeper takes the other nodes' copies: every snapshot's with buddy copies,
    // else those a checkpoint asks for (CopySnapshot).
    auto keeper = system.spawn(snapshot_keeper, job->snapshots, links, shard_book);
    end.actors.push_back(keeper);
    restarts.keeper = keeper;
    restarts.remote_shards = shard_book;
    // A copy's tensors may each take up to transport.timeout_s.
    restarts.copy_wait = std::max<std::chrono::milliseconds>(restarts.copy_wait, 2 * setup.transport_timeout);
    if (rejoin) restarts.rejoin_timeout = setup.rejoin_timeout;
    restarts.no_rejoin = no_rejoin;
  }
  RunWatchdog watchdog;
  watchdog.wire(restarts);
  auto coordinator = system.spawn(coordinator_actor, job, stages, observer, restarts);
  end.actors.push_back(coordinator);
  self->send(directory, coordinator_atom::value, coordinator);
  relay.deliver_to(coordinator);
  watchdog.start(job, coordinator);
  TrainResult result;
  self->request(coordinator, caf::infinite, train_atom::value)
      .receive([&](TrainResult& r) { result = std::move(r); },
               [&](caf::error& e) { failed = error_text(system, e); });
  const bool hung = watchdog.stop();
  // The shards the other nodes are still writing (the last checkpoint's) are reported to
  // the keeper, which ends with this function: the writer waits for them, so must this.
  if (const auto pending = shard_book ? shard_book->pending() : 0; pending > 0 && failed.empty() && !hung) {
    fmt::print(stderr, "conveyor train: waiting for the other nodes to write {} shard(s) of the last checkpoint\n",
               pending);
    if (!shard_book->wait_all(job->remote_shard_timeout))
      fmt::print(stderr, "conveyor train: the other nodes did not report every shard within "
                         "checkpoint.remote_timeout_s\n");
  }
  watch.stop();      // the other nodes leave now
  if (hung) {
    await_actors.limit_wait(kFailedJobGrace);
    throw HangError(watchdog.diagnosis());
  }
  if (!failed.empty()) {
    await_actors.limit_wait(kFailedJobGrace);
    throw std::runtime_error(failed);
  }
  if (result.replica_weights.empty()) {
    fetch_remote_weights(result.weights, *links, setup.transport_timeout);
    return result;
  }
  // Every replica's model, then the check the coordinator leaves to this point when the
  // replicas' bytes were still on their way (coordinator_actor.cpp).
  for (auto& replica : result.replica_weights)
    fetch_remote_weights(replica, *links, setup.transport_timeout);
  if (auto diff = replica_difference(result.replica_weights))
    throw std::runtime_error("data-parallel replicas ended with different weights: " + *diff);
  result.weights = result.replica_weights.front();
  return result;
}

}  // namespace conveyor
