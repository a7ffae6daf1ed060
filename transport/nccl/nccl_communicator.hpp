#pragma once
// One NCCL communicator: of two ranks for one directed pipeline edge (rank 0 sends, rank 1
// receives; see nccl_channel.hpp for why one direction only), or of the R ranks of a stage
// group that all-reduces gradients (transport/collective/nccl). `edge` names either.
//
// Blocking, with every wait bounded by the edge's timeout:
// - Only two NCCL steps can block the host on the peer: joining the communicator, and the
//   pair's first send/receive (NCCL connects a pair lazily, then). Both run on a setup
//   thread while the constructor waits with a deadline. At the deadline a communicator
//   that exists is aborted (ncclCommAbort from this thread is how NCCL unblocks a call
//   stuck in another) and the setup thread joined; a join that has not returned cannot be
//   aborted (NCCL has no handle yet), so that thread is left parked and discards the
//   communicator if it ever completes. Either way NcclTimeout names the edge.
// - After setup a send or receive only enqueues work on a stream; host waits poll a CUDA
//   event and ncclCommGetAsyncError under a deadline, then abort (wait()).
// Why not a non-blocking communicator (ncclConfig_t::blocking = 0), which would bound the
// setup without a thread: NCCL 2.28 then launches every operation from a new thread,
// measured at ~65 µs per send or receive on 2 × H200 (74 µs per 8 KiB message against
// 9 µs raw), far from the 2× budget.
// An aborted communicator is never used again: the edge is rebuilt with a fresh id.
// Thread-safety: one thread at a time (the stage that owns the edge).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "transport/nccl/nccl_error.hpp"

namespace conveyor {

class NcclCommunicator {
 public:
  using Clock = std::chrono::steady_clock;
  /// The pair's first operation, run on the setup thread: it enqueues one send (rank 0)
  /// or receive (rank 1) on the caller's stream; connecting the pair happens inside it.
  using FirstOperation = std::function<void(ncclComm_t)>;

  /// A fresh id: made by the edge's rank 0 and handed to rank 1 (nccl_rendezvous.hpp).
  static ncclUniqueId new_id();

  /// Joins as `rank` (0 ≤ rank < ranks) of `ranks` on cuda:`device`, then runs `first`
  /// (see above); returns once both are done. `edge` names the edge in every message.
  /// Throws NcclTimeout when a peer has not joined or connected within `timeout`,
  /// NcclError when NCCL fails.
  NcclCommunicator(const ncclUniqueId& id, int rank, int device, std::string edge,
                   std::chrono::milliseconds timeout, const FirstOperation& first,
                   int ranks = 2);
  /// Aborts, see the definition for why not ncclCommDestroy.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  /// REQUIRES: !aborted().
  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int device() const { return device_; }
  const std::string& edge() const { return edge_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool aborted() const { return comm_ == nullptr; }
  /// "nccl: edge 'act 1->2' (rank 1 on cuda:1)", the start of every message.
  std::string describe() const;

  /// Throws NcclError (after aborting) if NCCL reported an asynchronous error. Cheap.
  void check(std::string_view what);
  /// Polls `event` (recorded after an operation of this communicator) until it has
  /// completed, checking for asynchronous errors. At `deadline`: aborts, throws NcclTimeout.
  /// When `cancelled` (polled with the errors) says so: aborts, throws NcclError naming
  /// `why_cancelled`.
  void wait(cudaEvent_t event, std::string_view what, Clock::time_point deadline,
            const std::function<bool()>& cancelled = {}, std::string_view why_cancelled = {});
  /// Aborts the communicator; idempotent, never throws.
  void abort() noexcept;
  /// Aborts and throws NcclTimeout: "<edge>: <what> did not complete within 2 s; ...".
  [[noreturn]] void fail_timeout(std::string_view what);
  /// Aborts and throws NcclError: "<edge>: <what>: <why>; the communicator was aborted"
  /// (a wait its owner cancelled).
  [[noreturn]] void fail_cancelled(std::string_view what, std::string_view why);
  /// Aborts and throws NcclError for a failed call: file, line, call, NCCL's reason.
  [[noreturn]] void fail_call(ncclResult_t status, const char* call, const char* file, int line);

 private:
  [[noreturn]] void fail(ncclResult_t state, std::string_view what);

  ncclComm_t comm_ = nullptr;
  int rank_;
  int device_;
  std::string edge_;
  std::chrono::milliseconds timeout_;
};

}  // namespace conveyor

/// For calls on an NcclCommunicator `c`: a failure aborts it and throws NcclError.
#define NCCL_CHECK_COMM(c, call)                                           \
  do {                                                                     \
    const ncclResult_t conveyor_nccl_ = (call);                            \
    if (conveyor_nccl_ != ncclSuccess) (c).fail_call(conveyor_nccl_, #call, __FILE__, __LINE__); \
  } while (0)
