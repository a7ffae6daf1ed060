#pragma once
// Averaging a stage's gradients across the R data-parallel replicas of that stage (its
// stage group, stage_group.hpp), bucket by bucket: start(bucket) returns at once with a
// handle, the reduction runs in the background (a worker thread for Gloo, the group's
// CUDA stream for NCCL), and the handle's wait() completes it. Results are in place.
//
// What must hold on every rank:
// - the group was built with the same layout (checked when it is built);
// - buckets are started in the same order (the stage's action list is the same on every
//   replica, so starting each bucket at the same action gives the same order). A rank that
//   starts another bucket, or none, makes its peers' waits fail after the group's timeout.
// Guarantees: every rank ends with bitwise identical buckets, and the same inputs give the
// same bits from run to run (the summation order depends only on the group size and the
// bucket sizes). A bucket may be started again once its previous handle completed.
// After a failed bucket (CollectiveError from start() or from its handle) the group is
// broken and the buffers of its unfinished buckets hold unspecified values: the stage
// rolls back (snapshot or a healthy replica) and rebuilds the group, next generation.
// Thread-safety: start() from one thread at a time (the stage that owns the group).
#include <cstddef>
#include <memory>
#include <vector>

#include "transport/collective/all_reduce_handle.hpp"
#include "transport/collective/gradient_bucket.hpp"
#include "transport/collective/stage_group.hpp"

namespace conveyor {

class GradientAllReduce {
 public:
  virtual ~GradientAllReduce() = default;

  /// Starts the all-reduce of `bucket` (see the implementation for where it runs).
  /// Throws std::invalid_argument when the bucket does not match the layout (nothing is
  /// sent), CollectiveError when the group is broken; the Gloo group also throws
  /// std::logic_error for a bucket still in flight (NCCL queues it behind on its stream).
  virtual std::unique_ptr<AllReduceHandle> start(const GradientBucket& bucket) = 0;

  /// As start(), for buffers that kernels queued on `producer` (a cudaStream_t of the
  /// group's device) are still writing: the reduction runs once that stream has reached
  /// this point, and the host does not wait. A host group takes null only (its buffers are
  /// final when start is called) and throws std::invalid_argument for a stream.
  virtual std::unique_ptr<AllReduceHandle> start_after(const GradientBucket& bucket,
                                                       void* producer);

  /// ZeRO-1 (optim.shard_state): every rank holds `buffers` (the same counts everywhere),
  /// seen as one flat array cut into `counts`, one part per rank in rank order; on return
  /// every rank's part has been copied into every other rank's buffers (its own part is
  /// left as it was). Blocking, on the caller's thread. REQUIRES: no bucket in flight (the
  /// step's buckets completed); std::logic_error otherwise. Throws std::invalid_argument for
  /// counts that are not one per rank or do not add up to the buffers (nothing sent), and
  /// CollectiveError or CollectiveTimeout as a failed bucket (the group is then broken).
  /// The default throws std::logic_error: a group that cannot gather (NCCL, for now).
  virtual void all_gather(const std::vector<GradientBuffer>& buffers,
                          const std::vector<std::size_t>& counts);

  virtual const StageGroup& group() const = 0;
  virtual const BucketLayout& layout() const = 0;
};

}  // namespace conveyor
