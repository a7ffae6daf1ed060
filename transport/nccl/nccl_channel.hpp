#pragma once
// Tensors between GPUs of different processes (or hosts) over NCCL: the data plane of a
// pipeline edge that the in-process channels (tensor_channel.hpp) cannot serve.
//
// An edge here is directed: activations of stage i → i+1 is one edge, gradients of
// i+1 → i another. Each has its own two-rank communicator (rank 0 sends, rank 1
// receives). Why not one communicator for both directions: NCCL runs the kernels of one
// communicator one after the other, so in 1F1B's steady state stage i's send_forward,
// queued before its recv_backward, would wait for stage i+1's recv_forward, queued after
// its own send_backward: a deadlock unless every pair is grouped. One direction per
// communicator has no such ordering to get right.
//
// Usage (the multi-process launch wires this into the stage edges):
//
//   // both processes, with the rendezvous client they joined with (nccl_rendezvous.hpp)
//   NcclEdge edge{.name = "act 1->2", .device = local_gpu, .timeout = transport_timeout};
//   auto tx = connect_nccl_sender(store, edge);     // on stage 1's process
//   auto rx = connect_nccl_receiver(store, edge);   // on stage 2's process
//
//   // stage 1, after queuing the kernels that write `act` and record_ready(act, compute):
//   tx->send(act);                    // returns at once; `act` stays alive until sent
//   // stage 2, in the same order as stage 1 sends (the schedule fixes it):
//   Tensor a = rx->receive(shape, DType::bf16);   // returns at once, carries a ready event
//   wait_ready(a, compute_stream);                 // the consumer's stream waits on the GPU
//
//   // where the stage would synchronise anyway (end of a step), and never forever:
//   tx->flush(); rx->flush();        // NcclTimeout after transport.timeout_s, edge named
//   tx->poll();  rx->poll();         // no wait: throws if NCCL failed or an op is overdue
//
// Setup: the two ends' constructors return together (the communicator and its first
// message need both), bounded by the timeout. A process that builds several edges must
// build them in one order agreed by all processes (e.g. sorted by edge name), or on
// separate threads: A building X then Y while B builds Y then X times out.
// Memory: a received tensor comes from the caching allocator on the receive stream; like
// cuda-peer copies, the consumer lets go of it only after its own stream is done with it
// (kernels/cuda/allocator.hpp).
// Ordering: the sender's stream waits on the tensor's ready event (cudaStreamWaitEvent),
// the receiver records the received tensor's ready event on its receive stream: no host
// synchronisation on the hot path. Messages match in order: the n-th receive gets the
// n-th send, so both sides must agree on the sequence of shapes and dtypes; the bytes are
// sent as they are (bitwise), whatever the dtype.
// Errors: a failed or overdue operation aborts the communicator and throws NcclError /
// NcclTimeout naming the edge; the edge is then dead (rebuild it with a new generation).
// Thread-safety: a channel belongs to one thread (its stage) at a time.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/tensor/tensor.hpp"
#include "transport/nccl/nccl_edge_stream.hpp"

namespace conveyor {

struct NcclEdge {
  /// Names the edge in messages and in the rendezvous key ("act 1->2", "grad 2->1").
  std::string name;
  /// This side's GPU.
  int device = 0;
  /// Bounds every wait on the edge, setup included (transport.timeout_s).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Bump when the edge is rebuilt after a failure: a new communicator needs a new id.
  std::uint32_t generation = 0;
};

/// The sending side (rank 0) of an edge.
class NcclSendChannel {
 public:
  /// Joins the edge's communicator as rank 0 and exchanges a first message with the
  /// receiver (NCCL connects the pair then, not on the first activation). Returns once
  /// the receiver is constructed too; bounded by edge.timeout.
  NcclSendChannel(const ncclUniqueId& id, const NcclEdge& edge);

  /// Queues `tensor` (on edge.device, contiguous) to the receiver after its ready event.
  /// Returns without waiting for the GPU. Throws std::invalid_argument for a tensor on
  /// another device; NcclError / NcclTimeout when the edge failed or is overdue.
  void send(const Tensor& tensor);
  /// Waits until every queued send has left this GPU (bounded by the timeout).
  void flush() { side_.flush(); }
  /// Throws if the edge failed or a send is overdue; never waits.
  void poll() { side_.poll(); }
  /// Aborts the edge and throws NcclTimeout: `what` did not complete in time.
  [[noreturn]] void fail_timeout(std::string_view what) { side_.comm().fail_timeout(what); }
  /// Aborts the edge now (the peer is gone): queued work ends without it. Never throws.
  void abort() noexcept { side_.comm().abort(); }

  const NcclEdge& edge() const { return edge_; }
  cudaStream_t stream() const { return side_.stream(); }

 private:
  NcclEdge edge_;
  Tensor hello_;  // the first message, between making the communicator and queuing it
  NcclEdgeStream side_;
};

/// The receiving side (rank 1) of an edge.
class NcclRecvChannel {
 public:
  /// Joins as rank 1 and takes the sender's first message; see NcclSendChannel.
  NcclRecvChannel(const ncclUniqueId& id, const NcclEdge& edge);

  /// A new tensor on edge.device that the next message fills on the receive stream; it
  /// carries a ready event for the consumer (wait_ready). Returns without waiting.
  Tensor receive(const Shape& shape, DType dtype);
  /// Waits until every queued receive has arrived (bounded by the timeout).
  void flush() { side_.flush(); }
  void poll() { side_.poll(); }
  [[noreturn]] void fail_timeout(std::string_view what) { side_.comm().fail_timeout(what); }
  void abort() noexcept { side_.comm().abort(); }

  const NcclEdge& edge() const { return edge_; }
  cudaStream_t stream() const { return side_.stream(); }

 private:
  NcclEdge edge_;
  Tensor hello_;
  NcclEdgeStream side_;
};

}  // namespace conveyor
