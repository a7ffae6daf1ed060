#pragma once
// Issue 44 item 7: who stands by for the leader (the node that runs the coordinator and
// the store, node 0 at start), and who leads once it is lost. An election by rank: every
// survivor computes the same answer from its own record of the layout, so no vote is
// needed.
//
// What must hold: the successor the survivors elect is the layout's standby, the one node
// that kept copies of the leader's stages' snapshots (and, with the store mirror, the
// store): both are the lowest node of the layout other than the leader. A layout names
// every node kept in the job, the idle ones too (replan_nodes.hpp), so an idle node can
// stand by: it has no stage, but a keeper and a directory all the same. After a re-plan
// the standby is derived again from the new layout: a lost standby is replaced by the
// next lowest node.
// Pure logic, no CAF.
#include <set>
#include <string>
#include <vector>

namespace conveyor {

/// The node the survivors elect once `lost_leader` is lost: the lowest of `kept` (the
/// nodes of the layout the job runs now, idle ones included) other than it; -1 when no
/// other node is kept.
int successor(const std::vector<int>& kept, int lost_leader);

/// The standby of the layout over `nodes` led by `leader`: the node that would succeed it
/// (successor(nodes, leader)); -1 when the leader runs alone.
int standby_of(const std::vector<int>& nodes, int leader);

/// An election after the loss of the leader.
struct Election {
  int successor = -1;   // the node that leads from now on; -1 when none can
  std::string refused;  // why the job cannot go on under a new leader; empty: it can
};

/// Elects the successor of `lost_leader` among `kept` (the layout's nodes). `also_lost`:
/// other nodes known lost by now, whose loss the layout does not show yet (a loss at the
/// same moment, or one still waited for). The successor is the layout's standby: when it
/// is among `also_lost`, the copies it kept are gone with it and no other node holds them,
/// so the election is refused, saying so.
Election elect(const std::vector<int>& kept, int lost_leader, const std::set<int>& also_lost);

}  // namespace conveyor
