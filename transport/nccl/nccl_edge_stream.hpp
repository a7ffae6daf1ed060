#pragma once
// One side of an NCCL edge: the communicator, the side's own stream, and the operations
// queued on that stream that have not completed yet (oldest first).
//
// Each queued operation keeps its tensor alive and gets a completion event (from a small
// pool), so that
// - a sent tensor's block is not handed back to its allocator while NCCL still reads it
//   (the allocator requires that of blocks used on another stream), and
// - the host can wait for the side with a deadline (flush) or ask, without waiting,
//   whether the oldest operation has been pending for longer than the timeout (poll).
// Nothing here synchronises the host on the hot path: enqueue() only records an event.
// Thread-safety: one thread at a time.
#include <cuda_runtime_api.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/tensor/tensor.hpp"
#include "transport/nccl/nccl_communicator.hpp"

namespace conveyor {

class NcclEdgeStream {
 public:
  using Clock = NcclCommunicator::Clock;

  /// Makes the communicator with `join`, once this side's stream exists on cuda:`device`
  /// (the communicator's first operation is queued on it).
  NcclEdgeStream(int device,
                 const std::function<std::unique_ptr<NcclCommunicator>(cudaStream_t)>& join);
  /// Waits (bounded by the timeout) for queued operations, then aborts the communicator.
  /// Tensors of operations that did not finish are leaked on purpose: a kernel may still
  /// touch them.
  ~NcclEdgeStream();
  NcclEdgeStream(const NcclEdgeStream&) = delete;
  NcclEdgeStream& operator=(const NcclEdgeStream&) = delete;

  NcclCommunicator& comm() { return *comm_; }
  cudaStream_t stream() const { return stream_; }

  /// Before queuing an operation: throws if the communicator failed or the oldest
  /// operation is overdue; forgets operations that completed.
  void poll();
  /// After queuing an operation on stream(): remembers it with its tensor.
  /// `what` names it in a timeout ("receive of bf16 (3, 5)").
  void enqueue(Tensor keep_alive, std::string what);
  /// Waits until every queued operation has completed; bounded by the timeout counted
  /// from each operation's enqueue. Throws NcclTimeout / NcclError after aborting.
  void flush();
  /// Operations queued and not yet seen complete.
  std::size_t in_flight() const { return ops_.size(); }

 private:
  struct Op {
    Tensor keep_alive;
    cudaEvent_t done;
    Clock::time_point queued;
    std::string what;
  };
  void release_completed();
  void recycle(cudaEvent_t event) { free_events_.push_back(event); }

  std::unique_ptr<NcclCommunicator> comm_;
  cudaStream_t stream_ = nullptr;
  std::deque<Op> ops_;
  std::vector<cudaEvent_t> free_events_;
};

}  // namespace conveyor
