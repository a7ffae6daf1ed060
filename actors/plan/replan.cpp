#include "actors/plan/replan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

std::string node_list(const std::vector<LiveNode>& nodes) {
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ", ") + std::to_string(n.node);
  return out.empty() ? "none" : out;
}

int device_count(const std::vector<LiveNode>& nodes) {
  int n = 0;
  for (const auto& node : nodes) n += static_cast<int>(node.devices.size());
  return n;
}

// Stage actors in actor order onto the nodes in rank order, each up to its devices.
// REQUIRES: `actors` <= device_count(sorted).
std::vector<ActorSeat> seat_actors(const std::vector<LiveNode>& sorted, int actors) {
  std::vector<ActorSeat> seats;
  for (const auto& node : sorted)
    for (const auto& device : node.devices) {
      if (static_cast<int>(seats.size()) == actors) return seats;
      seats.push_back({node.node, device});
    }
  return seats;
}

// The cut of `stages` stages: the start's when the pipeline keeps its length, else as
// pipeline.partition says (an explicit list, written for P stages, becomes uniform).
std::vector<int> cut_model(const ConfiguredLayout& c, const sched::ScheduleSpec& spec, int model_stages,
                           PartitionMode& mode, std::vector<std::string>& warnings) {
  mode = c.partition;
  if (spec.stages == c.stages && !c.start_halves.empty()) return c.start_halves;
  if (c.partition == PartitionMode::automatic) {
    if (c.costs) {
      sched::PartitionRequest request;
      request.spec = spec;
      request.costs = *c.costs;
      return sched::auto_partition(request).halves_per_stage;
    }
    warnings.push_back(fmt::format("pipeline.partition auto: no layer costs kept from the start, so "
                                   "the {}-stage pipeline is cut uniformly",
                                   spec.stages));
  } else if (c.partition == PartitionMode::explicit_list) {
    warnings.push_back(fmt::format(
        "pipeline.partition {} is written for {} stages: the {}-stage pipeline is cut uniformly",
        sched::format_partition(c.start_halves), c.stages, spec.stages));
  }
  mode = PartitionMode::uniform;
  return sched::uniform_partition(c.layers, model_stages);
}

// The layout of `replicas` × `stages` on `sorted`, or why it cannot be (the schedule or
// the partition refuses it: an InputError's text).
std::optional<ElasticLayout> try_layout(const ConfiguredLayout& c, const std::vector<LiveNode>& sorted,
                                        int replicas, int stages, std::vector<std::string>& warnings,
                                        std::string& why_not) {
  try {
    // Each replica computes whole configured replicas' shares (configured_shares): the
    // first ones may take one more, so replica 0 has the most micro-batches.
    std::vector<MicroBatchShare> shares;
    for (int r = 0; r < replicas; ++r)
      shares.push_back(shares_micro_batches(c.micro_batches, c.replicas, replicas, r));
    const sched::ScheduleSpec spec{c.schedule, stages, shares.front().count, c.virtual_stages};
    sched::validate_spec(spec);
    const int model_stages = static_cast<int>(stages * sched::spec_chunks(spec));
    std::vector<std::string> cut_warnings;
    ElasticLayout layout;
    layout.replicas = replicas;
    layout.stages = stages;
    layout.halves_per_model_stage = cut_model(c, spec, model_stages, layout.partition, cut_warnings);
    layout.pipeline = make_pipeline_layout(spec, c.layers, layout.halves_per_model_stage);
    layout.seats = seat_actors(sorted, replicas * stages);
    for (int s = 0; s < stages; ++s)
      layout.pipeline.placement.ranks.at(static_cast<std::size_t>(s)).device =
          layout.seats.at(static_cast<std::size_t>(s)).device;
    layout.shares = shares;
    if (shares.back().count != shares.front().count)
      for (const auto& share : shares) {
        sched::ScheduleSpec own = spec;
        own.micro_batches = share.count;
        sched::validate_spec(own);
        layout.replica_schedules.push_back(sched::make_schedule(own));
      }
    warnings.insert(warnings.end(), cut_warnings.begin(), cut_warnings.end());
    return layout;
  } catch (const InputError& e) {
    why_not = fmt::format("{}: {}", describe_shape(replicas, stages), e.what());
    return std::nullopt;
  }
}

// The first layout that fits, trying `replicas` × each stage count from `most` down to 1.
std::optional<ElasticLayout> most_stages(const ConfiguredLayout& c, const std::vector<LiveNode>& sorted,
                                         int replicas, int most, std::vector<std::string>& warnings,
                                         std::string& why_not) {
  for (int p = most; p >= 1; --p)
    if (auto l = try_layout(c, sorted, replicas, p, warnings, why_not)) return l;
  return std::nullopt;
}

// The first layout that fits, trying each replica count from `most` down to 1, with the
// configured stages (every count holds whole configured replicas' shares).
std::optional<ElasticLayout> most_replicas(const ConfiguredLayout& c, const std::vector<LiveNode>& sorted,
                                           int most, std::vector<std::string>& warnings, std::string& why_not) {
  for (int r = most; r >= 1; --r)
    if (auto l = try_layout(c, sorted, r, c.stages, warnings, why_not)) return l;
  return std::nullopt;
}

// "3 each", or "4, 2" where the replicas' counts differ.
std::string share_counts(const ElasticLayout& l) {
  if (l.shares.front().count == l.shares.back().count) return fmt::format("{} each", l.shares.front().count);
  std::string out;
  for (const auto& s : l.shares) out += (out.empty() ? "" : ", ") + std::to_string(s.count);
  return out;
}

std::string chosen_reason(const ConfiguredLayout& c, const ElasticLayout& l, int devices,
                          const std::vector<LiveNode>& sorted) {
  const std::string where = fmt::format("{} on nodes {} ({} device(s) present)",
                                        describe_shape(l.replicas, l.stages), node_list(sorted), devices);
  if (l.replicas == c.replicas && l.stages == c.stages) return where + ": the configured layout";
  std::string why;
  if (l.replicas < c.replicas)
    why = fmt::format("{} of {} replica(s) dropped, the {} left taking {} of the step's {} "
                      "micro-batches",
                      c.replicas - l.replicas, c.replicas, l.replicas, share_counts(l), c.micro_batches);
  if (l.stages < c.stages)
    why += fmt::format("{}the pipeline cut into {} stages instead of {} ({} blocks per model stage)",
                       why.empty() ? "" : "; ", l.stages, c.stages,
                       sched::format_partition(l.halves_per_model_stage));
  return where + ": " + why;
}

}  // namespace

std::vector<int> ElasticLayout::nodes() const {
  std::set<int> out;
  for (const auto& s : seats) out.insert(s.node);
  return {out.begin(), out.end()};
}

std::string describe_shape(int replicas, int stages) {
  return fmt::format("{} replica{} × {} stage{}", replicas, replicas == 1 ? "" : "s", stages,
                     stages == 1 ? "" : "s");
}

Replan replan(const ConfiguredLayout& c, const std::vector<LiveNode>& nodes, ShrinkPolicy policy) {
  std::vector<LiveNode> sorted = nodes;
  std::sort(sorted.begin(), sorted.end(), [](const LiveNode& a, const LiveNode& b) { return a.node < b.node; });
  const int devices = device_count(sorted);
  Replan out;
  std::string why_not;
  const auto none = [&](std::string reason) {
    out.reason = fmt::format("no layout fits {} device(s) on nodes {}: {}", devices, node_list(sorted),
                             std::move(reason));
    return out;
  };
  if (policy == ShrinkPolicy::never) return none("fault.shrink is never");
  if (devices == 0) return none("there is no device to run a stage on");
  const bool drop_replicas =
      policy == ShrinkPolicy::replicas || (policy == ShrinkPolicy::automatic && c.replicas > 1);
  if (drop_replicas) {
    if (devices >= c.stages)
      out.layout = most_replicas(c, sorted, std::min(c.replicas, devices / c.stages), out.warnings, why_not);
    if (!out.layout && policy == ShrinkPolicy::replicas)
      return none(devices < c.stages
                      ? fmt::format("one replica of {} stages needs {} (fault.shrink replicas keeps "
                                    "the pipeline: auto or stages would shrink it)",
                                    c.stages, c.stages)
                      : why_not);
  }
  if (!out.layout) {
    // stages, or auto once no whole replica fits: auto keeps one replica, stages all.
    const int replicas = policy == ShrinkPolicy::stages ? c.replicas : 1;
    if (devices < replicas)  // fault.shrink stages only: auto keeps one replica here
      return none(fmt::format("{} replicas need at least {} (fault.shrink stages keeps the replicas: "
                              "auto or replicas would drop some)",
                              replicas, replicas));
    out.layout = most_stages(c, sorted, replicas, std::min(c.stages, devices / replicas), out.warnings, why_not);
    if (!out.layout) return none(why_not);
  }
  out.reason = chosen_reason(c, *out.layout, devices, sorted);
  return out;
}

bool grow_now(GrowPolicy policy, bool checkpoint_boundary) {
  switch (policy) {
    case GrowPolicy::at_step: return true;
    case GrowPolicy::at_checkpoint: return checkpoint_boundary;
    case GrowPolicy::never: return false;
  }
  return false;
}

}  // namespace conveyor
