#include "actors/runtime/node_watch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "actors/coordinator/job_failure.hpp"
#include "actors/coordinator/stage_end_text.hpp"
#include "actors/messages/messages.hpp"

namespace conveyor {
namespace {

using std::chrono::milliseconds;

bool normal_end(const caf::error& e) {
  return !e || e == caf::exit_reason::user_shutdown || e == caf::exit_reason::normal;
}

}  // namespace

void watch_stages(caf::scoped_actor& self, const NodeStages& mine, const std::vector<int>& node_of_rank,
                  const caf::actor& node0,
                  const LossRelay& relay, milliseconds grace, bool respawns,
                  const std::function<bool()>& forward_stop, milliseconds poll,
                  milliseconds peer_silence, bool leader_failover) {
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
  auto on_replaced = [&](stage_replaced_atom, int rank, StageActor& fresh) {
    self->monitor(fresh);
    rank_of[fresh.address()] = rank;
    ++alive;
    --unresolved[rank];
  };
  // The coordinator moves the job onto a new layout only once it settled the old one's
  // failures (it gave up on them): those of the old actors no longer count.
  bool idle = false;  // in the job without a stage (stage_idle_atom): waits for node 0
  auto on_relaid = [&](stage_relaid_atom, int rank, StageActor& fresh) {
    idle = false;
    self->monitor(fresh);
    rank_of[fresh.address()] = rank;
    ++alive;
    unresolved.clear();
    failed.clear();
  };
  auto on_idle = [&](stage_idle_atom) {
    idle = true;
    unresolved.clear();  // as on_relaid: the old layout's failures were settled
    failed.clear();
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
  while ((alive > 0 || waiting_for_replacement() || (idle && !node0_gone)) && !waited_out) {
    if (!node0_gone)
      self->receive(on_down, on_replaced, on_relaid, on_idle, on_lost, caf::after(poll) >> poll_stop);
    else
      self->receive(on_down, on_replaced, on_relaid, on_idle, on_lost,
                    caf::after(grace) >> [&] { waited_out = true; });
  }
  // Node 0 lost while stages ran: its end, not theirs, is what happened (a stage fails
  // as its peers on node 0 vanish). A job node 0 failed on purpose says so below.
  const auto node0_left = [&] {
    return fmt::format("node 0 ended or became unreachable while {} stage(s) of this node were still running", alive);
  };
  const bool stage_failed = std::ranges::any_of(unresolved, [](const auto& u) { return u.second > 0; });
  if (leader_failover && node0_gone && (waited_out || stage_failed) && job_failure.empty())
    throw LeaderLost(!lost.empty() && relay.node0_lost() ? lost : node0_left());
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
  if (waited_out) throw std::runtime_error(node0_left());
}

}  // namespace conveyor
