#pragma once
// The stage actor's side of edges that cross processes (stage_links.hpp): a PipeMessage
// for a rank in another process leaves as a PipeHeader over CAF plus its tensor on the
// channel to that process; an incoming PipeHeader is checked (shape, dtype, sender)
// before its receive is posted, and the tensor comes back into the actor's mailbox as an
// ordinary PipeMessage, so the StageWorker checks and orders it like a local one. A
// channel failure comes back as ChannelFailure and fails the stage with a message naming
// the edge, step and micro-batch. Nothing here blocks the actor's thread.
#include <caf/all.hpp>

#include "actors/stage/stage_actor.hpp"

namespace conveyor {

/// REQUIRES: self->state.links and links->crosses(dest).
void send_over_channel(StageSelf* self, int dest, PipeMessage message);

/// Throws std::runtime_error for a header this stage cannot take (wrong shape or dtype,
/// unknown sender).
void receive_over_channel(StageSelf* self, const PipeHeader& header);

/// On a node other than the keeper's (PeerTable::keeper_node, which runs the coordinator):
/// sends the bytes of every tensor of `weights` there (whose copy of the reply holds
/// PendingPayload placeholders). Elsewhere: nothing.
void send_weights_payload(StageSelf* self, const WeightsReply& weights);

/// Where a stage of `node` sends copies of its snapshots: the leader's keeper from any
/// other node, the standby's from the leader's own node (issue 44 item 7). A null keeper:
/// nowhere (one process, no keeper known yet, or the leader with no standby).
struct CopyRoute {
  KeeperActor keeper;
  int node = -1;
};
CopyRoute copy_route(const PeerTable& peers, int node);

/// A copy of the stage's snapshot after `steps_done` steps to `to` (snapshot_keeper.hpp):
/// the names over CAF, the bytes over the channel to `to.node`, in the background.
/// REQUIRES: to.keeper, and a channel to to.node.
void send_snapshot_copy(StageSelf* self, const CopyRoute& to, std::int64_t steps_done,
                        const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps);

/// Posts the receives of `copy`'s bytes from the keeper's node; CopyArrived comes back to
/// the stage (at once on the keeper's node, where the keeper's copy holds the tensors).
void receive_snapshot_copy(StageSelf* self, SnapshotCopy copy);

}  // namespace conveyor
