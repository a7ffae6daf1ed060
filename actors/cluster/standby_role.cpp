#include "actors/cluster/standby_role.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actors/plan/leader_election.hpp"

namespace conveyor {

StandbyRole::StandbyRole(int node, int leader, SpawnKeeper spawn)
    : node_(node), leader_(leader), spawn_(std::move(spawn)) {}

KeeperActor StandbyRole::on_layout(const std::vector<int>& nodes,
                                   const std::vector<int>& node_of_rank) {
  std::lock_guard lock(mutex_);
  stands_by_ = standby_of(nodes, leader_) == node_;
  leader_ranks_.clear();
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    if (node_of_rank[r] == leader_) leader_ranks_.push_back(static_cast<int>(r));
  if (!stands_by_) return {};
  if (!keeper_) keeper_ = spawn_(in_flight_);
  return keeper_;
}

std::string StandbyRole::holdings(const SnapshotStore& store, std::chrono::milliseconds wait) {
  std::vector<int> ranks;
  {
    std::lock_guard lock(mutex_);
    if (!stands_by_) return {};
    ranks = leader_ranks_;
  }
  const bool arrived = in_flight_->wait_idle(wait);
  if (ranks.empty()) return fmt::format("node {} runs no stage", leader_);
  const auto stages = fmt::format("stage(s) [{}]", fmt::join(ranks, ", "));
  const auto step = store.consistent_step(ranks);
  if (!step) return fmt::format("no copy of {} yet", stages);
  std::size_t bytes = 0;  // what node 0 sends this node after each snapshot
  for (int r : ranks)
    if (const auto copy = store.get(r, *step)) bytes += copy->bytes();
  return fmt::format("copies of {} up to step {} ({:.2f} MB a snapshot){}", stages, *step,
                     static_cast<double>(bytes) / 1e6, arrived ? "" : "; some copies still arriving");
}

std::string StandbyRole::summary(const SnapshotStore& store, std::chrono::milliseconds wait) {
  const auto held = holdings(store, wait);
  if (held.empty()) return {};
  return fmt::format("node {} stands by for node {}: {}", node_, leader_, held);
}

}  // namespace conveyor
