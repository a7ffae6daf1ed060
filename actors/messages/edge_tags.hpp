#pragma once
// Transport tags of the tensors that cross processes (layout: transport/ucx/ucx_tag.hpp).
// A tag must be unique among the messages in flight into one process:
//   activation / gradient   edge = the pipeline boundary (model stage ms → ms + 1 is edge
//                           ms, in both directions) of the sender's replica: replica r's
//                           boundary ms is edge r·(model stages) + ms, so that replicas,
//                           whose micro-batches are numbered from 0 each, never share a
//                           tag (parallel.data, actors/plan/replica_placement.hpp); step field =
//                           the plan's round (unique per plan, while a train step and its
//                           evaluation share a step number), micro-batch
//   final weights           kind control, edge = the sending stage actor's rank (unique
//                           over every replica), micro-batch field = index of the tensor
//                           in its reply (model stage after model stage), step 0
//   snapshot copies         kind control, edge = pipeline rank, step field = the sender's
//                           plan round when it sent the copy (mod 2^16) in the high 16
//                           bits and the step the snapshot follows (mod 65535, + 1: never
//                           0, so apart from the final weights) in the low 16, micro-batch
//                           field = index of the tensor in the stage's state
//                           (snapshot_keeper.hpp). The round: a step replayed after a
//                           recovery (by a replacement, or by another node after a move)
//                           is snapshotted again in a later round, so its copy never
//                           shares tags with the first run's, whose receives node 0 may
//                           still have posted when that copy broke off (they are not
//                           cancelled until transport.timeout_s, and UCX would match the
//                           new bytes to them). The step: two copies asked in one round
//                           (a checkpoint's and a grow's, of other steps) stay apart.
//                           Equal tags need rounds 65 536 apart within one timeout.
//   restores                kind restore, edge = pipeline rank, step field = the transfer's
//                           series (node 0's keeper numbers every restore it hands out:
//                           a restore of a move that was abandoned, still in flight, never
//                           shares a tag with the next move's restore of the same rank and
//                           step), micro-batch field = index of the tensor
#include <algorithm>
#include <cstdint>

#include "transport/ucx/ucx_tag.hpp"

namespace conveyor {

/// `replica`, `model_stages`: the sender's replica and the model stages of one replica.
inline std::uint64_t pipe_tag(bool activation, std::int64_t round, int micro_batch,
                              int from_model_stage, int to_model_stage, int replica = 0,
                              int model_stages = 0) {
  const std::int64_t boundary = std::min(from_model_stage, to_model_stage);
  return pack_tag(TagFields{std::int64_t{replica} * model_stages + boundary, round, micro_batch,
                            activation ? TagKind::activation : TagKind::gradient});
}

inline std::uint64_t weight_tag(int rank, int index) {
  return pack_tag(TagFields{rank, 0, index, TagKind::control});
}

/// `round`: the sender's plan round when it sent the copy (SnapshotCopy::round);
/// `steps_done`: the step its snapshot follows.
inline std::uint64_t snapshot_tag(int rank, std::int64_t round, std::int64_t steps_done, int index) {
  const std::int64_t step_field = ((round & 0xFFFF) << 16) | (steps_done % 0xFFFF + 1);
  return pack_tag(TagFields{rank, step_field, index, TagKind::control});
}

/// `series` > 0: the keeper's number of the restore (SnapshotCopy::series).
inline std::uint64_t restore_tag(int rank, std::uint32_t series, int index) {
  return pack_tag(TagFields{rank, series, index, TagKind::restore});
}

}  // namespace conveyor
