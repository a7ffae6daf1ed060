#pragma once
// Host tensors between processes (or hosts) over UCX tag send/receive.
//
//   UcxWorker a, b;                              // one per process (or per thread)
//   publish(a.address()) ... fetch(b_address)    // through the rendezvous store
//   UcxEndpoint& to_b = a.connect(b_address, "node 1");
//   to_b.send(pack_tag({edge, step, mb, TagKind::activation}), tensor);
//   Tensor t = from_a.receive(tag, shape, DType::f32);   // on b, from its endpoint to a
//
// Tags: a receive matches on all 64 bits of the tag from any peer of the worker, so the
// tag (ucx_tag.hpp) must be unique among the messages in flight into one worker; the
// endpoint a receive is called on only names the peer in errors. Messages with the same
// tag from one peer match receives in the order they were sent.
// Deadlines: every wait polls ucp_worker_progress until its deadline, then cancels the
// request and throws UcxTimeout naming the tag and the peer; nothing waits forever.
// Buffers: a request that is abandoned (timed out, or destroyed while in flight) keeps its
// tensor alive in the worker until UCX lets go of it, so UCX never writes freed memory.
// A receive lands in a buffer of the worker's HostBufferPool (host_buffer_pool.hpp), not a
// fresh zero-filled one: the buffer comes back when the received tensor's last handle goes
// away, and the next receive of that size reuses it.
// Memory: host tensors only (Debian's UCX has no CUDA support).
// Thread-safety: a worker, its endpoints and its requests belong to one thread at a time
// (UCS_THREAD_MODE_SINGLE); two workers may be driven by two threads.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/tensor/tensor.hpp"
#include "transport/ucx/host_buffer_pool.hpp"
#include "transport/ucx/ucx_error.hpp"
#include "transport/ucx/ucx_tag.hpp"

struct ucp_context;
struct ucp_worker;
struct ucp_ep;

namespace conveyor {

struct UcxOptions {
  /// UCX_TLS for this worker ("tcp", "self,sm,tcp"); empty: the UCX_TLS environment
  /// variable, else UCX's own choice.
  std::string transports;
  /// How long send / receive / wait may take before UcxTimeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// This worker's name in error messages ("node 0").
  std::string name = "this process";
  /// UCP_ERR_HANDLING_MODE_PEER: a broken connection fails the waits on that peer at once
  /// (instead of at their deadline), and endpoints close without the peer's answer. In
  /// UCX 1.13 the shared-memory transports (posix, sysv) cannot detect a failed peer, so
  /// this leaves TCP only, even on one host. Both sides must agree.
  bool detect_peer_failure = false;
  /// UCP_FEATURE_WAKEUP: wait_for_event() can block until UCX has work, instead of the
  /// caller polling (UcxHub's thread). Off for a worker that is only ever polled, so that
  /// the lanes UCX picks stay those of a worker without wakeup.
  bool wakeup = false;
};

class UcxWorker;
class UcxEndpoint;

/// One send or receive in flight. Move-only. wait() drives the worker until it completes.
class UcxRequest {
 public:
  UcxRequest() = default;
  UcxRequest(UcxRequest&& o) noexcept;
  UcxRequest& operator=(UcxRequest&& o) noexcept;
  UcxRequest(const UcxRequest&) = delete;
  UcxRequest& operator=(const UcxRequest&) = delete;
  /// An unfinished request is cancelled (a receive) or handed to the worker (a send).
  ~UcxRequest();

  /// True once the operation has finished, well or not (no progress is made here).
  bool done() const;
  /// Progresses the worker until done, for at most `timeout` (default: the worker's).
  /// Throws UcxTimeout, or UcxError for a failed operation or a wrong length.
  /// Returns the tensor sent or received into.
  Tensor wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  std::uint64_t tag() const { return tag_; }

 private:
  friend class UcxWorker;
  friend class UcxEndpoint;
  enum class Kind { send, receive };
  void release();
  std::string what() const;  // "receive of activation ... from node 1"

  UcxWorker* worker_ = nullptr;
  const UcxEndpoint* endpoint_ = nullptr;  // whose failure ends the wait early
  void* request_ = nullptr;  // UCX's request; nullptr once complete
  Kind kind_ = Kind::send;
  std::uint64_t tag_ = 0;
  Tensor tensor_;
  std::string peer_;
};

/// A connection from a worker to one peer worker; owned by the worker.
class UcxEndpoint {
 public:
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  /// Starts sending `tensor` (host memory; kept alive by the request).
  UcxRequest post_send(std::uint64_t tag, const Tensor& tensor);
  /// Starts a receive of a tensor of this shape and dtype from this peer.
  UcxRequest post_receive(std::uint64_t tag, const Shape& shape, DType dtype);

  /// Sends and waits until UCX is done with the buffer.
  void send(std::uint64_t tag, const Tensor& tensor,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /// Receives one tensor; throws UcxError when the message's length differs from
  /// shape × dtype, UcxTimeout after the deadline.
  Tensor receive(std::uint64_t tag, const Shape& shape, DType dtype,
                 std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  const std::string& peer() const { return peer_; }
  UcxWorker& worker() { return *worker_; }
  /// UCX's description of the lanes this endpoint uses (transports, devices), for logs.
  std::string transport_info() const;

 private:
  friend class UcxWorker;
  friend class UcxRequest;
  UcxEndpoint(UcxWorker& worker, ucp_ep* ep, std::string peer)
      : worker_(&worker), ep_(ep), peer_(std::move(peer)) {}

  UcxWorker* worker_;
  ucp_ep* ep_;
  std::string peer_;
  int failure_ = 0;  // the ucs_status_t UCX reported for this peer, 0 while it is healthy
};

class UcxWorker {
 public:
  explicit UcxWorker(UcxOptions options = {});
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;
  /// Flushes and closes every endpoint (bounded by the timeout), then frees everything.
  ~UcxWorker();

  /// This worker's address, to publish for peers (opaque bytes, sealed: worker_address.hpp).
  std::vector<std::byte> address() const;
  /// An endpoint to the worker at `peer_address` (another worker's address()); `peer`
  /// names it in errors. THROWS UcxError when the address is not an intact sealed one,
  /// before UCX sees it.
  UcxEndpoint& connect(std::span<const std::byte> peer_address, std::string peer);

  /// One round of ucp_worker_progress; true if anything happened.
  bool progress();

  /// After progress() found nothing: blocks until UCX has something to progress (bytes
  /// arrived, a socket can take more), `other_fd` is readable (-1: none), or `timeout`
  /// passed. Returns at once when UCX has events pending already (progress again).
  /// False, having waited for nothing, when the worker has no wakeup (options().wakeup
  /// off): the caller paces its polls itself.
  bool wait_for_event(std::chrono::microseconds timeout, int other_fd);

  const UcxOptions& options() const { return options_; }
  /// Bounds the flush and close of the destructor (default: options().timeout); a worker
  /// whose peers are gone uses a short one so that closing does not wait for them.
  void set_close_timeout(std::chrono::milliseconds timeout) { close_timeout_ = timeout; }

  /// The UCX_TLS this worker was configured with ("" for UCX's default).
  const std::string& transports() const { return options_.transports; }

  /// Where received tensors come from (shared with the tensors it handed out).
  HostBufferPool& receive_buffers() { return *receive_buffers_; }

 private:
  friend class UcxRequest;
  friend class UcxEndpoint;
  struct Orphan {
    void* request;
    Tensor keep_alive;
  };
  void adopt(void* request, Tensor keep_alive);
  void reap_orphans();
  void flush(std::chrono::steady_clock::time_point deadline);

  UcxOptions options_;
  std::chrono::milliseconds close_timeout_ = options_.timeout;
  ucp_context* context_ = nullptr;
  ucp_worker* worker_ = nullptr;
  int event_fd_ = -1;  // UCX's, with options().wakeup; owned by UCX
  std::deque<std::unique_ptr<UcxEndpoint>> endpoints_;
  std::vector<Orphan> orphans_;
  std::shared_ptr<HostBufferPool> receive_buffers_ = HostBufferPool::create();
};

}  // namespace conveyor
