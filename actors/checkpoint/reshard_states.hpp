#pragma once
// Resharding in memory (issue 44's elastic re-plan): the training state of the old stages
// — what StageModel::capture_state() returned, or StateSnapshot::tensors() — cut for the
// stages of a new partition. It is the on-disk resharding (reshard.hpp) with the old
// stages' tensors pooled by their global names instead of read from a checkpoint's shards:
// the same function decides which new stage takes which tensor, with the same checks
// (every tensor the new stages need is there, with its shape and dtype; every old tensor
// is taken by exactly one new stage), so a job that shrinks or grows in memory and one
// that resumes a checkpoint into another stage count cannot disagree.
//
// REQUIRES: whole states. A ZeRO-1 replica's capture holds the moments of its own range
// only (zero elsewhere): merge the replicas' captures first (sharded_state.hpp).
// Tensors of the result share bytes with `old_stages` (no copy): restore_state copies them
// into the new models.
#include <string>
#include <vector>

#include "actors/checkpoint/reshard.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor::checkpoint {

/// Each new stage's state, in reshard()'s order (its parameters, each followed by its
/// opt.m / opt.v / master tensors present), from the old stages' states.
/// Throws CheckpointError(`where`, ...) when a name is held by two old stages, or on any
/// violation reshard() reports (all of them at once).
std::vector<std::vector<NamedTensor>> reshard_states(const std::vector<std::vector<NamedTensor>>& old_stages,
                                                     const std::vector<std::vector<TensorSpec>>& new_stages,
                                                     const std::string& where);

}  // namespace conveyor::checkpoint
