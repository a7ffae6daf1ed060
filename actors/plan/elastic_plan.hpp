#pragma once
// The job's plan on an elastic layout (issue 44): what replan() needs from the plan the job
// started with, and the plan the job runs once replan() chose a layout. replan.hpp decides
// the layout; this file only carries it into a JobPlan, so that every actor of the new
// layout reads its placement, schedule and share of the data from the plan as at start.
//
// What must hold:
// - plan_for_layout changes only where the stage actors run and what each holds: the model,
//   the data (seed, global micro-batches, micro-batch size), the optimizer, the learning
//   rate schedule, the step count and the recovery settings are the started plan's, so a
//   step computes the same global batch on any layout;
// - the configured layout is always the one the job STARTED with (never a shrunk one):
//   a layout is a function of the configured one and the nodes present (replan.hpp).
// Pure logic: no CAF, no I/O.
#include <optional>
#include <set>
#include <vector>

#include "actors/plan/job_plan.hpp"
#include "actors/plan/replan.hpp"
#include "actors/plan/replan_event.hpp"

namespace conveyor {

/// The layout the job started with, as replan() takes it. `costs`: the layer costs the
/// start partitioned with (pipeline.partition auto); nullopt otherwise.
/// Throws std::invalid_argument when plan.partition is not uniform | auto | explicit.
ConfiguredLayout configured_layout(const JobPlan& plan, std::optional<sched::ModelCosts> costs = std::nullopt);

/// The nodes that run a stage actor in `node_of_rank` (by actor, replica-major), but the
/// `lost` ones, each with the devices of the stage actors it runs (plan.actor_placement).
/// REQUIRES: node_of_rank.size() == plan.stage_actors().
std::vector<LiveNode> live_nodes(const JobPlan& plan, const std::vector<int>& node_of_rank,
                                 const std::set<int>& lost);

/// `started` running `layout`: its placement (with the seats' devices), schedule, replicas,
/// actor devices and partition; everything else as `started`.
JobPlan plan_for_layout(const JobPlan& started, const ElasticLayout& layout);

/// The node of every stage actor of `layout` (replica-major), as NodeSetup::node_of_rank.
std::vector<int> node_of_rank(const ElasticLayout& layout);

/// A layout chosen for the nodes present, carried into a plan (both empty when none fits).
struct ElasticChoice {
  Replan replan;                   // the layout, or why none fits; warnings for the log
  std::optional<JobPlan> plan;     // plan_for_layout(started, layout)
  std::vector<int> node_of_rank;   // node_of_rank(layout)
};

/// The layout the job runs on with the nodes `present`: a pure function of the plan the job
/// started with, where its actors started (`started_nodes`, by actor) and the nodes present,
/// so that node 0's coordinator and every other node compute the same layout on their own.
/// Each node present has the devices its actors had at start.
ElasticChoice choose_layout(const JobPlan& started, const std::vector<int>& started_nodes,
                            const std::vector<int>& present);

/// The layout `plan` runs, as the replan row's "from"/"to" show it.
LayoutSummary summarize(const JobPlan& plan, const std::vector<int>& node_of_rank);

}  // namespace conveyor
