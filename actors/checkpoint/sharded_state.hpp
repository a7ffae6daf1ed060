#pragma once
// optim.shard_state (ZeRO-1, kernels/optim/optimizer_shard.hpp): a checkpoint still holds
// one whole copy of each pipeline stage, but no replica has the whole AdamW state. Each
// replica's capture holds the weights (the same on every replica) and the moments
// opt.m.* / opt.v.* in whole form, zero outside its own part (param_state.hpp); the
// stage's state is replica 0's weights with every moment element taken from the replica
// that owns it.
//
// How the owner is found without the parts' bounds: the parts are disjoint and a
// non-owner's element is +0.0, all bits zero, so OR-ing the replicas' bit patterns yields
// the owner's bits exactly (also for -0.0 and NaN).
// What must hold: every replica's capture names the same tensors with the same shapes.
#include <vector>

#include "actors/checkpoint/snapshot.hpp"

namespace conveyor::checkpoint {

/// `by_actor`: the captures of every stage actor, replica-major (R·P shards: actor
/// r·P + p is replica r of stage p). Returns P shards, stage p's state merged from its R
/// replicas. The merge runs lazily (as the shard's producer, on the checkpoint writer's
/// thread); it throws std::runtime_error, naming the tensor, when the replicas' captures
/// differ in names or shapes. Throws std::invalid_argument unless by_actor.size() is a
/// multiple of `replicas`.
std::vector<StageShard> merge_sharded_replicas(std::vector<StageShard> by_actor, int replicas);

}  // namespace conveyor::checkpoint
