#pragma once
// The GPU implementation of GradientAllReduce: one NCCL communicator per stage group
// (transport/nccl/nccl_communicator.hpp, R ranks), all-reducing f32 or bf16 device buffers
// in place on a stream the caller gives.
//
// Building one (every rank of the group, each in its own process or thread):
// 1. agree on the layout through the store (layout_agreement.hpp);
// 2. rank 0 makes the communicator's unique id and publishes it under
//    "<group prefix>nccl-id"; the others poll for it;
// 3. every rank joins the communicator and runs one 1-element all-reduce, so that NCCL's
//    lazy connection setup happens here, bounded, and not in the first bucket.
// All bounded by `timeout`; the constructor throws CollectiveTimeout or CollectiveError
// naming the group and this rank.
//
// Stream semantics: start() queues the bucket on `stream` (one ncclAllReduce per buffer,
// in one ncclGroupStart/End, so NCCL launches them together) and records an event after
// it; it never blocks the host. The all-reduce reads the buffers when the stream reaches
// it: the caller makes `stream` wait for the kernels that wrote the gradients
// (cudaStreamWaitEvent) before start(), and makes consumers (the optimizer's stream) wait
// for the result with wait_on_device(), or waits on the host with the handle. Buckets run
// in start order on every rank.
// Average: NCCL's ncclAvg (for floats: each input scaled by 1/R, then summed). Every
// rank receives the same bits (ring and tree both compute each sum once and copy it), and
// runs repeat for a fixed NCCL version, topology and NCCL_* environment.
// Failures: NCCL's asynchronous errors, a peer that does not take part within `timeout`
// (measured from the host wait) and a cancellation of the group's generation abort the
// communicator and throw from the handle; the group is then broken and must be rebuilt
// (next generation) on every rank.
// A group of size 1 makes no communicator; its buckets complete unchanged.
//
// Thread-safety: one thread at a time for start(), the handles and wait_on_device() (the
// stage that owns the group). REQUIRES: handles do not outlive the group; the group is
// destroyed only after its buckets completed (the communicator is aborted, not drained).
#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>

#include "transport/collective/gradient_all_reduce.hpp"
#include "transport/collective/group_cancellation.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

struct NcclGroupOptions {
  StageGroup group;
  /// Every bucket the stage will start; f32 or bf16. The same on every rank.
  BucketLayout layout;
  Reduction reduction = Reduction::average;
  /// The CUDA device of this rank; every buffer is device memory of it.
  int device = 0;
  /// Caller-owned stream on `device` where the all-reduces are queued; null: the group
  /// makes a non-blocking stream of its own (destroyed after the communicator).
  cudaStream_t stream = nullptr;
  /// Bound on joining the group and on each host wait for a bucket.
  std::chrono::milliseconds timeout{30'000};
  /// When set (the process's stage groups, replica_groups.hpp): a host wait for a bucket
  /// ends as soon as this group's generation is cancelled (group_cancellation.hpp), with
  /// a CollectiveError, instead of at `timeout`. Outlives the group.
  const GroupCancellation* cancellation = nullptr;
};

class NcclGradientAllReduce final : public GradientAllReduce {
 public:
  /// Uses `store` only while constructing (it may be shared by the ranks of one process).
  NcclGradientAllReduce(RendezvousClient& store, NcclGroupOptions options);
  ~NcclGradientAllReduce() override;
  NcclGradientAllReduce(const NcclGradientAllReduce&) = delete;
  NcclGradientAllReduce& operator=(const NcclGradientAllReduce&) = delete;

  /// Queues `bucket` on the group's stream (see above). A bucket may be started again at
  /// once: the stream orders it after the previous one.
  std::unique_ptr<AllReduceHandle> start(const GradientBucket& bucket) override;
  /// Makes the group's stream wait for `producer` (a cudaStream_t of this device) on the
  /// device, then start(bucket): the host never waits.
  std::unique_ptr<AllReduceHandle> start_after(const GradientBucket& bucket,
                                               void* producer) override;

  /// Makes `consumer` wait, on the device, for everything queued on the group's stream so
  /// far (the buckets started until now). Does not report NCCL errors: a handle's wait()
  /// or done() does.
  void wait_on_device(cudaStream_t consumer);

  const StageGroup& group() const override;
  const BucketLayout& layout() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
