#pragma once
// Issue 44: which nodes a re-plan counts. A shrink onto fewer replicas can leave a survivor
// without a stage (its seats went with the dropped replica); its process stays in the job,
// idle, its directory known to node 0's, waiting for node 0 (actors/runtime/node_watch.cpp).
// Such a node is as present as one that runs a stage: the next re-plan (a grow when a node
// joins, a shrink when another is lost) seats it again where the layout has room.
//
// What must hold: every move names all the nodes kept in the job (node 0's directory
// forgets those a Relayout does not name), so an idle node stays counted from one move to
// the next until it is lost; a node lost for good, or one awaited, is never counted.
// Pure logic, no CAF.
#include <set>
#include <vector>

namespace conveyor {

/// The nodes of `moved_onto` (a Relayout's) that run no stage actor of `node_of_rank`
/// (the layout moved onto, by actor): kept in the job, idle.
std::set<int> idle_nodes(const std::vector<int>& moved_onto, const std::vector<int>& node_of_rank);

/// The nodes a re-plan seats, ascending: those running a stage actor of `node_of_rank`,
/// the `idle` ones and the `joined` ones, but the `lost` ones.
std::vector<int> replan_nodes(const std::vector<int>& node_of_rank, const std::set<int>& idle,
                              const std::set<int>& joined, const std::set<int>& lost);

}  // namespace conveyor
