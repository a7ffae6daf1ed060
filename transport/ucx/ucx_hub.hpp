#pragma once
// One process's UCX worker, driven by a thread of its own. UCX moves bytes only while
// someone progresses the worker: a stage actor that waits for its next CAF message (or
// computes) would stall the sends and receives it started, and a peer's rendezvous-
// protocol send into it. The hub's thread progresses the worker while anything is in
// flight and sleeps while nothing is.
//
//   UcxHub hub(options);                        // address() → the rendezvous store
//   hub.connect(1, address_of_node_1, "node 1");
//   hub.send(1, tag, tensor, 30s, [](Tensor, std::exception_ptr e) { ... });
//   hub.receive(1, tag, shape, DType::f32, 30s, [](Tensor t, std::exception_ptr e) { ... });
//
// Every operation completes exactly once, on the hub's thread, by calling its callback
// with the tensor or an exception: UcxTimeout when it did not finish by its deadline (a
// receive is then cancelled, a send's buffer kept alive until UCX lets go), UcxError for a
// failed operation or a message of the wrong length. Callbacks must be quick (hand the
// result to an actor) and must not call into the hub.
// Polling: while something is in flight the thread polls, yielding first, then blocks on
// the worker's events (UcxOptions::wakeup, which the hub turns on) and on its own wake-up
// fd (an op queued), so that idle waits neither eat the CPU of compute threads nor stall
// a transfer: the thread is back as soon as bytes arrive (poll_backoff.hpp).
// Thread-safety: every public member may be called from any thread.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/ucx/ucx_worker.hpp"

namespace conveyor {

class UcxHub {
 public:
  using Done = std::function<void(Tensor, std::exception_ptr)>;

  explicit UcxHub(UcxOptions options);
  /// Waits for the sends in flight (at most the worker's timeout), drops the receives in
  /// flight without calling their callbacks, stops the thread and closes the worker.
  ~UcxHub();
  UcxHub(const UcxHub&) = delete;
  UcxHub& operator=(const UcxHub&) = delete;

  /// This worker's address, to publish for the peers.
  const std::vector<std::byte>& address() const { return address_; }
  /// Creates the endpoint to peer `peer` (the caller's numbering, e.g. node ranks); `name`
  /// names it in errors. Blocks until done; throws UcxError.
  void connect(int peer, std::vector<std::byte> peer_address, std::string name);

  /// REQUIRES: connect(peer) returned. Never blocks.
  void send(int peer, std::uint64_t tag, Tensor tensor, std::chrono::milliseconds timeout,
            Done done);
  void receive(int peer, std::uint64_t tag, Shape shape, DType dtype,
               std::chrono::milliseconds timeout, Done done);

  /// The peers are gone or the job failed: the destructor then neither waits for sends
  /// in flight nor for the peers to acknowledge the close (100 ms at most).
  void abandon();

  /// Blocks until every send posted so far has completed (or failed); false when some
  /// are still in flight after `timeout`.
  bool drain_sends(std::chrono::milliseconds timeout);

  const UcxOptions& options() const { return options_; }

 private:
  struct Op;
  struct InFlight;
  void run();
  void post(Op& op);
  void complete(InFlight& f, Tensor t, std::exception_ptr e);
  void enqueue(Op op);
  void wake();  // the hub thread, wherever it waits

  UcxOptions options_;
  std::unique_ptr<UcxWorker> worker_;  // used by the hub thread only, once it runs
  std::vector<std::byte> address_;
  std::map<int, UcxEndpoint*> endpoints_;  // hub thread only

  std::mutex mutex_;
  std::condition_variable wake_;     // new ops or stop, for the hub thread
  std::condition_variable drained_;  // sends_in_flight_ reached 0
  std::vector<Op> queue_;
  bool stop_ = false;
  bool abandoned_ = false;
  std::size_t sends_in_flight_ = 0;  // posted by callers, not yet completed
  std::vector<InFlight> in_flight_;  // hub thread only
  int wake_fd_ = -1;  // eventfd: enqueue() writes, the hub thread waits on it with UCX's
  std::thread thread_;
};

}  // namespace conveyor
