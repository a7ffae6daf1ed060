#include "actors/cluster/node_directory.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <set>

#include "actors/messages/error_text.hpp"
#include "actors/trace/remote_progress.hpp"
#include "actors/trace/stage_probe.hpp"

namespace conveyor {

struct RelayoutGather {
  std::uint32_t generation = 0;      // the layout's (Relayout::generation)
  caf::response_promise promise;     // the coordinator's request
  std::map<int, NodeStages> by_node;  // the new actors gathered so far
  std::size_t left = 1;              // answers still due, this node's own included
  std::set<int> awaited;             // the other nodes whose answer is due
  bool over = false;                 // answered, or ended: later answers' actors end
};

namespace {

using Self = caf::stateful_actor<NodeDirectoryState>;

LayoutActors layout_actors(const NodeDirectoryState& st) {
  return LayoutActors{st.by_rank, st.standby.keeper, st.standby.keeper ? st.standby.node : -1};
}

// One answer after several replies: the first failure answers at once (later replies are
// ignored), the last of `left` successes lets the caller finish and answer true.
struct Countdown {
  caf::typed_response_promise<bool> promise;
  std::size_t left = 0;
  bool failed = false;

  void fail(std::string why) {
    if (failed) return;
    failed = true;
    promise.deliver(failure(std::move(why)));
  }
  /// One success; true when it was the last one expected (and none failed).
  bool arrived() { return !failed && --left == 0; }
};

// Records a node's stages; an unknown or repeated rank is a bug of the launcher.
caf::error add(Self* self, const NodeStages& stages) {
  auto& st = self->state;
  if (stages.ranks.size() != stages.actors.size())
    return failure(fmt::format("node {} announced {} ranks and {} actors", stages.node,
                               stages.ranks.size(), stages.actors.size()));
  for (std::size_t i = 0; i < stages.ranks.size(); ++i) {
    const int r = stages.ranks[i];
    if (r < 0 || r >= st.ranks || st.by_rank[r])
      return failure(fmt::format("node {} announced rank {}, which is {}", stages.node, r,
                                 r < 0 || r >= st.ranks ? "out of range" : "taken"));
    st.by_rank[r] = stages.actors[i];
    ++st.known;
  }
  st.ranks_of_node[stages.node] = stages.ranks;
  if (stages.directory) st.directories[stages.node] = stages.directory;
  if (stages.keeper) st.standby = {stages.node, stages.keeper};
  if (st.known == st.ranks) {
    for (auto& p : st.waiting) p.deliver(layout_actors(st));
    st.waiting.clear();
  }
  return caf::none;
}

// A replacement of a lost node, or (after a re-plan) a node that joins the shrunk job:
// channels first (here and on every other node), then the coordinator learns of its
// stages, then the node hears back.
caf::result<bool> rejoin(Self* self, NodeStages stages) {
  auto& st = self->state;
  auto known = st.ranks_of_node.find(stages.node);
  if (!st.reconnect)
    return failure(fmt::format("node {} announced its stages again, but this job does not take "
                               "replacements (fault.policy restart with fault.rejoin_timeout_s > 0)",
                               stages.node));
  // Not in the layout the job runs now: it joins (issue 44's grow), whatever ranks it ran.
  const bool joins = st.relaid && known == st.ranks_of_node.end();
  if (joins && !st.no_grow.empty()) {
    const auto why = fmt::format("node {} joined a job that shrank without it, but the job takes no node back: {}",
                                 stages.node, st.no_grow);
    fmt::print(stderr, "conveyor train: {}\n", why);  // node 0's log says it too
    return failure(why);
  }
  if (joins && !st.coordinator)
    return failure(fmt::format("node {} joined, but node 0's coordinator does not run", stages.node));
  if (!joins && (known == st.ranks_of_node.end() || known->second != stages.ranks ||
                 stages.actors.size() != stages.ranks.size()))
    return failure(fmt::format("node {} rejoined with ranks [{}], but it ran [{}]", stages.node,
                               fmt::join(stages.ranks, ", "),
                               known == st.ranks_of_node.end() ? "" : fmt::format("{}", fmt::join(known->second, ", "))));
  try {
    st.reconnect(stages.node, stages.ucx_address);
  } catch (const std::exception& e) {
    return failure(fmt::format("connecting to node {}'s replacement: {}", stages.node, e.what()));
  }
  st.directories[stages.node] = stages.directory;
  std::vector<caf::actor> others;
  for (auto& [node, d] : st.directories)
    if (node != stages.node && d != caf::actor_cast<caf::actor>(self)) others.push_back(d);
  // A joiner reaches the layout's nodes by itself, but not the nodes that joined before
  // it and wait to be taken in with it: it is told their workers here, before the
  // coordinator hears of it (so before any Relayout seats them side by side).
  std::vector<PeerRejoined> waiting_joiners;
  if (joins) {
    for (auto it = st.joiner_ucx.begin(); it != st.joiner_ucx.end();) {
      if (st.ranks_of_node.count(it->first) || !st.directories.count(it->first)) {
        it = st.joiner_ucx.erase(it);  // taken in since, or forgotten by a move
        continue;
      }
      if (it->first != stages.node) waiting_joiners.push_back(PeerRejoined{it->first, it->second});
      ++it;
    }
    st.joiner_ucx[stages.node] = stages.ucx_address;
  }
  auto p = std::make_shared<Countdown>(
      Countdown{self->make_response_promise<bool>(), others.size() + waiting_joiners.size() + 1});
  auto one_done = [self, p, stages, joins] {
    if (!p->arrived()) return;
    if (joins) {
      // Its actors are not the layout's: the coordinator's grow spawns those (Relayout).
      self->send(self->state.coordinator, node_joined_atom::value, stages);
      p->promise.deliver(true);
      return;
    }
    for (std::size_t i = 0; i < stages.ranks.size(); ++i)
      self->state.by_rank[stages.ranks[i]] = stages.actors[i];
    if (stages.keeper) self->state.standby = {stages.node, stages.keeper};
    if (self->state.coordinator) self->send(self->state.coordinator, stages);
    p->promise.deliver(true);
  };
  for (auto& d : others)
    self->request(d, std::chrono::seconds(30), PeerRejoined{stages.node, stages.ucx_address})
        .then([one_done](bool) { one_done(); },
              [self, p, node = stages.node](caf::error& e) {
                // The replacement fails; the coordinator keeps waiting.
                p->fail(fmt::format("a node could not connect to node {}'s replacement: {}",
                                    node, error_text(self->system(), e)));
              });
  for (auto& peer : waiting_joiners)
    self->request(stages.directory, std::chrono::seconds(30), peer)
        .then([one_done](bool) { one_done(); },
              [self, p, node = stages.node, other = peer.node](caf::error& e) {
                p->fail(fmt::format("node {} could not connect to node {}, which joined too: {}", node, other,
                                    error_text(self->system(), e)));
              });
  one_done();
  return p->promise;
}

// Respawns one of this node's stages, or forwards to the node that runs it.
caf::result<StageActor> respawn(Self* self, const RespawnStage& r) {
  auto& st = self->state;
  const auto& mine = st.ranks_of_node[st.node];
  if (std::find(mine.begin(), mine.end(), r.rank) != mine.end()) {
    if (!st.respawn) return failure(fmt::format("node {} does not respawn its stages", st.node));
    try {
      auto fresh = st.respawn(r.rank, r.round_fence);
      st.by_rank.at(static_cast<std::size_t>(r.rank)) = fresh;
      return fresh;
    } catch (const std::exception& e) {
      return failure(fmt::format("respawning stage {} on node {}: {}", r.rank, st.node, e.what()));
    }
  }
  for (const auto& [node, ranks] : st.ranks_of_node)
    if (node != st.node && std::find(ranks.begin(), ranks.end(), r.rank) != ranks.end() &&
        st.directories.count(node)) {
      auto promise = self->make_response_promise();
      promise.delegate(st.directories[node], r);
      return promise;
    }
  return failure(fmt::format("no node runs stage {}", r.rank));
}

// Every node's NCCL edges rebuilt: node 0's directory asks the others first (their
// edges' other ends), then rebuilds its own (blocking: each edge's two ends meet), then
// answers once all are done.
caf::result<bool> rebuild(Self* self, const RebuildChannels& r) {
  auto& st = self->state;
  auto p = std::make_shared<Countdown>(Countdown{self->make_response_promise<bool>(), 1});
  if (r.forward)
    for (auto& [node, d] : st.directories) {
      if (node == st.node) continue;
      ++p->left;
      self->request(d, caf::infinite, RebuildChannels{r.generation, false})
          .then(
              [p](bool) {
                if (p->arrived()) p->promise.deliver(true);
              },
              [self, p, node = node](caf::error& e) {
                p->fail(fmt::format("node {}: {}", node, error_text(self->system(), e)));
              });
    }
  try {
    if (st.rebuild) st.rebuild(r.generation);
  } catch (const std::exception& e) {
    p->fail(fmt::format("node {} rebuilding its NCCL edges: {}", st.node, e.what()));
    return p->promise;
  }
  if (p->arrived()) p->promise.deliver(true);
  return p->promise;
}

// Ends a move that will not take over (failed, or void: a node was lost during it): the
// actors gathered for it end in order, and its request is answered with `why` (the
// coordinator ignores it when it voided the move itself). Later answers' actors end as
// they come (relayout).
void end_move(Self* self, RelayoutGather& g, caf::error why) {
  if (g.over) return;
  g.over = true;
  for (auto& [node, stages] : g.by_node)
    for (auto& a : stages.actors) self->send_exit(a, caf::exit_reason::user_shutdown);
  g.by_node.clear();
  auto& st = self->state;
  if (st.moving.get() == &g) st.moving.reset();
  g.promise.deliver(std::move(why));
}

// Node `node`, whose answer the move awaits, is gone: the coordinator hears of the loss
// first (the same sender, so in order) and abandons the move; the failed answer that
// follows is then void.
void node_lost_of_move(Self* self, RelayoutGather& g, int node) {
  auto& st = self->state;
  if (st.coordinator)
    self->send(st.coordinator, node_lost_atom::value, node,
               fmt::format("node {} became unreachable while moving onto layout generation {}", node, g.generation));
  end_move(self, g, failure(fmt::format("node {} became unreachable while moving onto the new layout", node)));
}

// Issue 44's re-plan: this node's actors of the new layout; node 0 (`forward`) also every
// other present node's, gathered by rank, and then the directory's own record moves onto
// the new layout (the nodes not present forgotten).
caf::response_promise relayout(Self* self, const Relayout& r) {
  auto& st = self->state;
  auto promise = self->make_response_promise();
  if (!st.relayout) {
    promise.deliver(failure(fmt::format("node {} cannot move onto another layout", st.node)));
    return promise;
  }
  NodeStages own;
  try {
    own = st.relayout(r);
  } catch (const std::exception& e) {
    promise.deliver(failure(fmt::format("node {} moving onto the layout of nodes [{}]: {}", st.node,
                                        fmt::join(r.nodes, ", "), e.what())));
    return promise;
  }
  own.node = st.node;
  own.directory = caf::actor_cast<caf::actor>(self);
  if (!r.forward) {
    promise.deliver(own);
    return promise;
  }
  // A move still gathered is void by now (the coordinator sends one Relayout at a time).
  if (st.moving) end_move(self, *st.moving, failure("a newer move began"));
  auto g = std::make_shared<RelayoutGather>();
  g->generation = r.generation;
  g->promise = promise;
  g->by_node[st.node] = own;
  st.moving = g;
  auto finish = [self, g] {
    auto& st = self->state;
    std::map<int, StageActor> by_rank;
    for (const auto& [node, stages] : g->by_node)
      for (std::size_t i = 0; i < stages.ranks.size(); ++i) by_rank[stages.ranks[i]] = stages.actors[i];
    std::vector<StageActor> all;
    for (const auto& [rank, actor] : by_rank) {
      if (rank != static_cast<int>(all.size())) {
        end_move(self, *g, failure(fmt::format("the new layout's rank {} has no stage actor", all.size())));
        return;
      }
      all.push_back(actor);
    }
    st.by_rank = all;
    st.ranks = static_cast<int>(all.size());
    st.known = st.ranks;
    st.ranks_of_node.clear();
    st.standby = {};  // the new layout's standby, if one answered with its keeper
    std::map<int, caf::actor> directories;
    for (const auto& [node, stages] : g->by_node) {
      st.ranks_of_node[node] = stages.ranks;
      if (st.directories.count(node)) directories[node] = st.directories[node];
      if (stages.keeper) st.standby = {node, stages.keeper};
    }
    st.directories = std::move(directories);
    st.relaid = true;
    g->over = true;
    if (st.moving == g) st.moving.reset();
    g->promise.deliver(layout_actors(st));
  };
  for (int node : r.nodes) {
    if (node == st.node) continue;
    auto d = st.directories.find(node);
    if (d == st.directories.end()) {
      end_move(self, *g, failure(fmt::format("node {} is not known to node {}'s directory", node, st.node)));
      return promise;
    }
    ++g->left;
    g->awaited.insert(node);
    // CAF does not fail a request whose receiver's process goes away: its directory's
    // down message says so at once (node_lost_of_move), where the liveness watch would
    // take rendezvous.peer_silence_s.
    self->monitor(d->second);
    Relayout forwarded = r;
    forwarded.forward = false;
    self->request(d->second, caf::infinite, forwarded)
        .then(
            [self, g, finish](NodeStages& stages) {
              if (g->over) {  // a void move's: they never take over
                for (auto& a : stages.actors) self->send_exit(a, caf::exit_reason::user_shutdown);
                return;
              }
              g->awaited.erase(stages.node);
              g->by_node[stages.node] = std::move(stages);
              if (--g->left == 0) finish();
            },
            [self, g, node](caf::error& e) {
              if (g->over) return;
              if (e == caf::sec::request_receiver_down || e == caf::exit_reason::remote_link_unreachable) {
                node_lost_of_move(self, *g, node);
                return;
              }
              end_move(self, *g,
                       failure(fmt::format("node {} moving onto the new layout: {}", node,
                                           error_text(self->system(), e))));
            });
  }
  if (--g->left == 0) finish();
  return promise;
}

// Node `node`, in the layout without a stage, is lost: no move or joiner is sent to it, and
// a process that joins from now on does not dial it. A node that runs ranks is left alone
// (its loss is a recovery's, and the next move forgets it).
void forget_idle_node(Self* self, int node) {
  auto& st = self->state;
  auto known = st.ranks_of_node.find(node);
  if (node == st.node || known == st.ranks_of_node.end() || !known->second.empty()) return;
  st.ranks_of_node.erase(known);
  st.directories.erase(node);
  st.joiner_ucx.erase(node);
  if (!st.publish_layout) return;
  std::vector<int> nodes;
  for (const auto& [n, ranks] : st.ranks_of_node) nodes.push_back(n);
  try {
    st.publish_layout(nodes);
  } catch (const std::exception& e) {
    fmt::print(stderr, "conveyor: node {} is forgotten, but the layout's nodes could not be published again: {}\n",
               node, e.what());
  }
}

// A peer's progress report into the watched board; one warning per node for bad ones.
void take_progress(Self* self, const ProgressReport& report) {
  auto& st = self->state;
  if (!st.watched || report.node == st.node) return;
  auto ranks = st.ranks_of_node.find(report.node);
  if (ranks == st.ranks_of_node.end()) return;  // not announced (yet): nothing to compare
  auto refused = trace::apply_progress_report(*st.watched, report.node, ranks->second,
                                              report.stages, trace::now_ns());
  if (refused && st.refused_reports.insert(report.node).second)
    fmt::print(stderr, "conveyor: ignoring a progress report: {}\n", *refused);
}

}  // namespace

caf::behavior node_directory(Self* self, int ranks, NodeStages local, Reconnect reconnect,
                             RespawnLocal respawn_local, RebuildEdges rebuild_edges, PeerStop peer_stop,
                             std::shared_ptr<trace::ProgressBoard> watched, RelayoutLocal relayout_local,
                             std::string no_grow, PublishLayoutNodes publish_layout) {
  self->state.ranks = ranks;
  self->state.by_rank.resize(ranks);
  self->state.reconnect = std::move(reconnect);
  self->state.respawn = std::move(respawn_local);
  self->state.rebuild = std::move(rebuild_edges);
  self->state.peer_stop = std::move(peer_stop);
  self->state.watched = std::move(watched);
  self->state.relayout = std::move(relayout_local);
  self->state.no_grow = std::move(no_grow);
  self->state.publish_layout = std::move(publish_layout);
  self->state.node = local.node;
  local.directory = caf::actor_cast<caf::actor>(self);
  if (auto err = add(self, local)) self->quit(err);
  // Only the directories a move was forwarded to are monitored (relayout).
  self->set_down_handler([=](caf::down_msg& down) {
    auto& st = self->state;
    if (!st.moving) return;
    for (const auto& [node, d] : st.directories)
      if (d.address() == down.source && st.moving->awaited.count(node)) {
        node_lost_of_move(self, *st.moving, node);
        return;
      }
  });
  return {
      [=](NodeStages& stages) -> caf::result<bool> {
        auto& st = self->state;
        if (st.known == st.ranks) return rejoin(self, std::move(stages));
        if (auto err = add(self, stages)) return err;
        return true;
      },
      [=](stages_atom) -> caf::result<LayoutActors> {
        auto& st = self->state;
        if (st.known == st.ranks) return layout_actors(st);
        st.waiting.push_back(self->make_response_promise());
        return st.waiting.back();
      },
      [=](coordinator_atom, CoordinatorActor coordinator) { self->state.coordinator = std::move(coordinator); },
      [=](reach_atom) { return self->state.node; },
      // From a peer: a node of this job that announced its stages, else it is ignored.
      [=](stop_request_atom, int node, int signal) {
        auto& st = self->state;
        if (st.peer_stop && node != st.node && st.ranks_of_node.count(node) > 0) st.peer_stop(node, signal);
      },
      [=](const ProgressReport& report) { take_progress(self, report); },
      [=](forget_node_atom, int node) { forget_idle_node(self, node); },
      [=](const RespawnStage& r) { return respawn(self, r); },
      [=](const RebuildChannels& r) { return rebuild(self, r); },
      [=](const Relayout& r) { return relayout(self, r); },
      [=](relayout_void_atom, std::uint32_t generation) {
        auto& st = self->state;
        if (st.moving && st.moving->generation == generation)
          end_move(self, *st.moving,
                   failure(fmt::format("the move onto layout generation {} is void: a node was lost during it",
                                       generation)));
      },
      [=](const PeerRejoined& peer) -> caf::result<bool> {
        if (!self->state.reconnect) return failure("this node does not take replacements");
        try {
          self->state.reconnect(peer.node, peer.ucx_address);
        } catch (const std::exception& e) {
          return failure(fmt::format("connecting to node {}'s replacement: {}", peer.node, e.what()));
        }
        return true;
      },
  };
}

}  // namespace conveyor
