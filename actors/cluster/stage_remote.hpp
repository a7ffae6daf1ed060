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

using StageSelf = caf::stateful_actor<StageActorState>;

/// REQUIRES: self->state.links and links->crosses(dest).
void send_over_channel(StageSelf* self, int dest, PipeMessage message);

/// Throws std::runtime_error for a header this stage cannot take (wrong shape or dtype,
/// unknown sender).
void receive_over_channel(StageSelf* self, const PipeHeader& header);

/// On a node other than 0: sends the bytes of every tensor of `weights` to node 0 (whose
/// copy of the reply holds PendingPayload placeholders). Elsewhere: nothing.
void send_weights_payload(StageSelf* self, const WeightsReply& weights);

}  // namespace conveyor
