#pragma once
// A stage's weight gradients averaged with its data-parallel replicas (parallel.data > 1,
// issue 9), overlapped with its last backward of each step.
//
// Buckets: every chunk's StageModel::gradient_buckets(), chunk after chunk (a CUDA model:
// its embedding, each block, its head; a CPU model: the chunk as one bucket). Each bucket
// starts as soon as it is final: before the chunk's last weight-gradient action of the
// step (its last B or W) the stage arms the model, which names each bucket as its last
// gradient kernel is queued (GPU: the reduction waits for the compute stream on the device,
// so NCCL runs while the following blocks still compute); buckets a model did not name
// start when that action returns. finish() waits for all of them before the stage squares
// its gradients for the report.
//
// What must hold: every replica of a stage holds the same chunks, so the layouts agree and
// the buckets start in the same order on every rank (the action lists are the same and
// the models name buckets in a fixed order). The average is written in place; every
// replica ends with the same bits (the group's guarantee), so the optimizer steps keep the
// replicas identical. A bucket may still be writing its gradients until its handle is
// done or failed: every bucket of a step is settled (waited for, bounded by the group's
// timeout) before finish() returns or throws and before the group is destroyed
// (gradient_all_reduce.hpp REQUIRES it), so a recovery may then zero the gradients or
// drop the group. A failed bucket breaks the group for good: the stage leaves it and joins
// the next generation (actors/job/replica_groups.hpp).
// CAF-free; one thread (the stage's).
#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/model/stage_model.hpp"
#include "transport/collective/gradient_all_reduce.hpp"

namespace conveyor {

/// What one step's averaging cost on this stage: `busy_ms` the reductions' own time,
/// `exposed_ms` how long the stage still waited for them once its compute was done (the
/// part not hidden behind backward).
struct ReductionTiming {
  double busy_ms = 0.0;
  double exposed_ms = 0.0;
};

class ReplicaGradients {
 public:
  /// The layout every replica declares: one entry per bucket of every chunk, in order.
  /// Throws std::invalid_argument for a bucket mixing dtypes.
  static BucketLayout layout_of(const std::vector<StageModel*>& chunks);

  /// `group` was built with layout_of(chunks). The models outlive this object.
  /// `shard_optimizer_state` (ZeRO-1): every chunk's optimizer keeps its part for the
  /// group's rank only (StageModel::shard_optimizer_state), and gather_parameters() must
  /// follow each optimizer step.
  ReplicaGradients(std::unique_ptr<GradientAllReduce> group, std::vector<StageModel*> chunks,
                   bool shard_optimizer_state = false);
  /// Settles the buckets still pending, then destroys the group.
  ~ReplicaGradients();
  ReplicaGradients(const ReplicaGradients&) = delete;
  ReplicaGradients& operator=(const ReplicaGradients&) = delete;

  /// Before chunk `chunk`'s last weight-gradient action of a train step.
  void arm(std::size_t chunk);
  /// After that action returned: starts the chunk's buckets the model did not name.
  void after_last_backward(std::size_t chunk);
  /// Waits for every bucket of the step. Throws std::logic_error when a chunk's buckets
  /// were not all started, CollectiveError when the group failed (every bucket settled).
  ReductionTiming finish();

  bool shards_optimizer_state() const { return shard_optimizer_state_; }
  /// The group itself, for a collective other than the step's average (the gathered
  /// gradient shares of a shrunk job: share_gradients.hpp). REQUIRES: no bucket in flight.
  GradientAllReduce& group() { return *group_; }
  /// ZeRO-1: after every chunk's optimizer step, each replica's updated part of the
  /// chunk's parameters is copied to the others (GradientAllReduce::all_gather), chunk by
  /// chunk; returns the milliseconds it took. Throws as all_gather does.
  double gather_parameters();

 private:
  void start(std::size_t chunk, std::size_t local);
  /// Waits for every pending bucket, done or failed (errors dropped), and forgets them.
  void settle() noexcept;

  std::unique_ptr<GradientAllReduce> group_;
  bool shard_optimizer_state_ = false;
  std::vector<StageModel*> chunks_;
  std::vector<std::size_t> first_bucket_;            // by chunk: its first global bucket index
  std::vector<std::vector<GradientSpans>> buckets_;  // by chunk, fetched when armed
  std::vector<std::unique_ptr<AllReduceHandle>> pending_;  // by global bucket, this step
};

}  // namespace conveyor
