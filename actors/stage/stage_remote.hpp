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

/// On a node other than 0: sends the bytes of every tensor of `weights` to node 0 (whose
/// copy of the reply holds PendingPayload placeholders). Elsewhere: nothing.
void send_weights_payload(StageSelf* self, const WeightsReply& weights);

/// On a node other than 0 whose peers name node 0's snapshot keeper: a copy of the
/// stage's snapshot after `steps_done` steps goes there (snapshot_keeper.hpp); the send
/// runs in the background. Elsewhere: nothing.
void send_snapshot_copy(StageSelf* self, std::int64_t steps_done,
                        const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps);

/// Posts the receives of `copy`'s bytes from node 0; CopyArrived comes back to the stage
/// (at once on node 0, where the keeper's copy holds the tensors themselves).
void receive_snapshot_copy(StageSelf* self, SnapshotCopy copy);

}  // namespace conveyor
