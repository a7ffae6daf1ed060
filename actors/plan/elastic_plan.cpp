#include "actors/plan/elastic_plan.hpp"

#include <map>
#include <stdexcept>

namespace conveyor {
namespace {

PartitionMode partition_mode(const std::string& name) {
  if (name == "uniform") return PartitionMode::uniform;
  if (name == "auto") return PartitionMode::automatic;
  if (name == "explicit") return PartitionMode::explicit_list;
  throw std::invalid_argument("JobPlan::partition \"" + name + "\" is not uniform, auto or explicit");
}

const char* partition_name(PartitionMode mode) {
  switch (mode) {
    case PartitionMode::uniform: return "uniform";
    case PartitionMode::automatic: return "auto";
    case PartitionMode::explicit_list: return "explicit";
  }
  return "uniform";
}

std::vector<int> halves_per_model_stage(const Placement& placement) {
  std::vector<int> halves(static_cast<std::size_t>(placement.model_stages()));
  for (const auto& rank : placement.ranks)
    for (const auto& c : rank.chunks) halves.at(static_cast<std::size_t>(c.model_stage)) = c.slice.num_halves();
  return halves;
}

}  // namespace

ConfiguredLayout configured_layout(const JobPlan& plan, std::optional<sched::ModelCosts> costs) {
  ConfiguredLayout c;
  c.schedule = plan.schedule.spec.name;
  c.virtual_stages = plan.schedule.spec.virtual_stages;
  c.stages = static_cast<int>(plan.placement.ranks.size());
  c.replicas = plan.replicas;
  c.micro_batches = plan.data.micro_batches;
  c.layers = static_cast<int>(plan.model.layers);
  c.partition = partition_mode(plan.partition);
  c.start_halves = halves_per_model_stage(plan.placement);
  c.costs = std::move(costs);
  return c;
}

std::vector<LiveNode> live_nodes(const JobPlan& plan, const std::vector<int>& node_of_rank,
                                 const std::set<int>& lost) {
  std::map<int, LiveNode> by_node;
  for (int a = 0; a < static_cast<int>(node_of_rank.size()); ++a) {
    const int node = node_of_rank[static_cast<std::size_t>(a)];
    if (lost.count(node)) continue;
    auto& n = by_node[node];
    n.node = node;
    n.devices.push_back(plan.actor_placement(a).device);
  }
  std::vector<LiveNode> out;
  for (auto& [node, n] : by_node) out.push_back(std::move(n));
  return out;
}

JobPlan plan_for_layout(const JobPlan& started, const ElasticLayout& layout) {
  JobPlan plan = started;
  plan.schedule = layout.pipeline.schedule;
  plan.placement = layout.pipeline.placement;
  plan.replica_schedules = layout.replica_schedules;
  plan.replicas = layout.replicas;
  // Fewer replicas than started: each running replica computes the shares of the ones it
  // stands for (StageData::gradient_shares), so a step's gradient is the started
  // replicas' average, bit for bit from R replicas to any R' (actors/worker/gradient_shares.hpp,
  // share_gradients.hpp). Back on the started count (a grow): none.
  plan.configured_replicas = layout.replicas < started.replicas ? started.replicas : 0;
  plan.actor_devices.clear();
  if (layout.replicas > 1)
    for (const auto& seat : layout.seats) plan.actor_devices.push_back(seat.device);
  plan.partition = partition_name(layout.partition);
  return plan;
}

std::vector<int> node_of_rank(const ElasticLayout& layout) {
  std::vector<int> nodes;
  for (const auto& seat : layout.seats) nodes.push_back(seat.node);
  return nodes;
}

ElasticChoice choose_layout(const JobPlan& started, const std::vector<int>& started_nodes,
                            const std::vector<int>& present) {
  std::set<int> gone(started_nodes.begin(), started_nodes.end());
  for (int n : present) gone.erase(n);
  ElasticChoice out;
  out.replan = replan(configured_layout(started), live_nodes(started, started_nodes, gone), started.recovery.shrink);
  if (!out.replan.ok()) return out;
  out.plan = plan_for_layout(started, *out.replan.layout);
  out.node_of_rank = node_of_rank(*out.replan.layout);
  return out;
}

LayoutSummary summarize(const JobPlan& plan, const std::vector<int>& node_of_rank) {
  std::set<int> nodes(node_of_rank.begin(), node_of_rank.end());
  if (nodes.empty()) nodes.insert(0);  // one process: every actor on node 0
  LayoutSummary out{plan.replicas, static_cast<int>(plan.placement.ranks.size()), {nodes.begin(), nodes.end()},
                    halves_per_model_stage(plan.placement), {}};
  if (plan.stands_for_configured())
    for (int r = 0; r < plan.replicas; ++r) out.gradient_shares.push_back(plan.gradient_shares(r));
  return out;
}

}  // namespace conveyor
