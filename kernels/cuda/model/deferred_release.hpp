#pragma once
// Keeps tensors that a stream still reads alive until that stream has passed the reads.
//
// Why: a device block returns to the free list of the stream it was allocated on as soon
// as its last handle goes (allocator.hpp). A stage reads tensors allocated on other
// streams (the previous stage's activation, a peer copy, the next stage's gradient); if it
// dropped its handle right after queuing the reads, the producer could reuse the block
// while this stage's stream is still reading it. hold() records an event on the reading
// stream and keeps the handle until the event has completed.
//
// Thread-safety: none; one owner thread (the stage actor's).
#include <cuda_runtime_api.h>

#include <deque>
#include <vector>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class DeferredRelease {
 public:
  /// `stream` is the reading stream; `device` its device. Does not own the stream.
  DeferredRelease(cudaStream_t stream, int device);
  /// Waits for every held tensor's event (the stream must still exist).
  ~DeferredRelease();
  DeferredRelease(const DeferredRelease&) = delete;
  DeferredRelease& operator=(const DeferredRelease&) = delete;

  /// Keeps `tensor` until the work queued on the stream so far has completed. Host and
  /// empty tensors are dropped at once (nothing to protect).
  void hold(Tensor tensor);

  /// Drops the handles whose events have completed (oldest first). Never blocks.
  void collect();

  /// Blocks until every held tensor may be dropped, and drops them.
  void drain();

  std::size_t held() const { return held_.size(); }

 private:
  struct Held {
    Tensor tensor;
    cudaEvent_t done;
  };
  cudaStream_t stream_;
  int device_;
  std::deque<Held> held_;
  std::vector<cudaEvent_t> spare_;  // completed events, reused by later holds
};

}  // namespace conveyor
