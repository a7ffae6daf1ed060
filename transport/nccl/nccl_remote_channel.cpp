#include "transport/nccl/nccl_remote_channel.hpp"

#include <deque>
#include <utility>
#include <exception>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "transport/poll_backoff.hpp"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// One direction of one edge: its NCCL end, and the operations queued on its stream that
// have not been reported yet (oldest first; they complete in this order on the stream).
struct NcclRemoteChannel::Side {
  struct Op {
    Done done;
    Tensor tensor;
    cudaEvent_t event = nullptr;
    Clock::time_point deadline;
    std::string what;
  };

  std::string name;
  int device = 0;
  std::unique_ptr<NcclSendChannel> tx;
  std::unique_ptr<NcclRecvChannel> rx;
  std::mutex mutex;
  std::deque<Op> ops;
  std::vector<std::pair<Done, std::exception_ptr>> refused;  // failed when started
  std::vector<cudaEvent_t> free_events;

  ~Side() {
    tx.reset();  // waits (bounded) for queued work, then aborts the communicator
    rx.reset();
    DeviceGuard guard(device);
    for (Op& op : ops) (void)cudaEventDestroy(op.event);
    for (cudaEvent_t e : free_events) (void)cudaEventDestroy(e);
    (void)cudaGetLastError();
  }
  cudaStream_t stream() const { return tx ? tx->stream() : rx->stream(); }
  void poll() { tx ? tx->poll() : rx->poll(); }
  [[noreturn]] void fail_timeout(const std::string& what) {
    tx ? tx->fail_timeout(what) : rx->fail_timeout(what);
  }
  // True when an operation queued here has not completed on the GPU.
  bool unfinished() {
    for (Op& op : ops) {
      const cudaError_t status = cudaEventQuery(op.event);
      (void)cudaGetLastError();
      if (status != cudaSuccess) return true;
    }
    return false;
  }
  void abort() noexcept { tx ? tx->abort() : rx->abort(); }
  cudaEvent_t take_event() {
    if (!free_events.empty()) {
      cudaEvent_t e = free_events.back();
      free_events.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
};

NcclRemoteChannel::NcclRemoteChannel(std::shared_ptr<RemoteChannel> host, std::string peer_name)
    : host_(std::move(host)), peer_name_(std::move(peer_name)) {
  if (!host_) throw std::invalid_argument("nccl remote channel to " + peer_name_ + ": no host channel");
  thread_ = std::thread([this] { run(); });
}

NcclRemoteChannel::~NcclRemoteChannel() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // A run that ends well leaves nothing in flight; what is left means the run failed (a
  // peer is gone or behind): abort rather than wait the timeout for each edge.
  for (auto& [key, side] : sides_)
    if (side->unfinished()) side->abort();
  sides_.clear();
}

void NcclRemoteChannel::add_sender(TagKind kind, std::int64_t edge,
                                   std::unique_ptr<NcclSendChannel> tx) {
  auto side = std::make_unique<Side>();
  side->name = tx->edge().name;
  side->device = tx->edge().device;
  side->tx = std::move(tx);
  std::lock_guard lock(mutex_);
  if (!sides_.emplace(Key{static_cast<int>(kind), edge}, std::move(side)).second)
    throw std::logic_error("nccl remote channel to " + peer_name_ + ": edge " +
                           std::to_string(edge) + " added twice");
}

void NcclRemoteChannel::add_receiver(TagKind kind, std::int64_t edge,
                                     std::unique_ptr<NcclRecvChannel> rx) {
  auto side = std::make_unique<Side>();
  side->name = rx->edge().name;
  side->device = rx->edge().device;
  side->rx = std::move(rx);
  std::lock_guard lock(mutex_);
  if (!sides_.emplace(Key{static_cast<int>(kind), edge}, std::move(side)).second)
    throw std::logic_error("nccl remote channel to " + peer_name_ + ": edge " +
                           std::to_string(edge) + " added twice");
}

NcclRemoteChannel::Side& NcclRemoteChannel::existing(TagKind kind, std::int64_t edge, bool sending) {
  std::lock_guard lock(mutex_);
  auto it = sides_.find(Key{static_cast<int>(kind), edge});
  if (it == sides_.end() || (sending ? !it->second->tx : !it->second->rx))
    throw std::logic_error("nccl remote channel to " + peer_name_ + ": no " +
                           (sending ? "sending" : "receiving") + " edge " + std::to_string(edge) +
                           " to replace");
  return *it->second;
}

// Aborts `side`'s communicator and fails what is queued on it with ChannelReset; the
// caller then installs the new end. REQUIRES: side.mutex held.
void NcclRemoteChannel::reset(Side& side) {
  side.abort();
  const auto e = std::make_exception_ptr(
      ChannelReset("nccl: edge '" + side.name + "' was rebuilt by a recovery"));
  for (Side::Op& op : side.ops) {
    side.free_events.push_back(op.event);
    side.refused.emplace_back(std::move(op.done), e);
  }
  side.ops.clear();
}

void NcclRemoteChannel::abort_edges() {
  std::vector<Side*> sides;
  {
    std::lock_guard lock(mutex_);
    for (auto& [key, side] : sides_) sides.push_back(side.get());
  }
  for (Side* side : sides) {
    std::lock_guard lock(side->mutex);
    reset(*side);
  }
  wake_.notify_one();
}

void NcclRemoteChannel::replace_sender(TagKind kind, std::int64_t edge,
                                       std::unique_ptr<NcclSendChannel> tx) {
  Side& side = existing(kind, edge, /*sending=*/true);
  std::unique_ptr<NcclSendChannel> old;
  {
    std::lock_guard lock(side.mutex);
    reset(side);
    old = std::exchange(side.tx, std::move(tx));
  }
  wake_.notify_one();  // the failed operations are reported by the channel's thread
}

void NcclRemoteChannel::replace_receiver(TagKind kind, std::int64_t edge,
                                         std::unique_ptr<NcclRecvChannel> rx) {
  Side& side = existing(kind, edge, /*sending=*/false);
  std::unique_ptr<NcclRecvChannel> old;
  {
    std::lock_guard lock(side.mutex);
    reset(side);
    old = std::exchange(side.rx, std::move(rx));
  }
  wake_.notify_one();
}

std::size_t NcclRemoteChannel::edges() const {
  std::lock_guard lock(mutex_);
  return sides_.size();
}

NcclRemoteChannel::Side* NcclRemoteChannel::side_for(std::uint64_t tag) const {
  TagFields f;
  try {
    f = unpack_tag(tag);
  } catch (const std::out_of_range&) {
    return nullptr;  // not a pipeline tag: the host channel reports it
  }
  std::lock_guard lock(mutex_);
  auto it = sides_.find(Key{static_cast<int>(f.kind), f.edge});
  return it == sides_.end() ? nullptr : it->second.get();
}

void NcclRemoteChannel::send(std::uint64_t tag, const Tensor& tensor,
                             std::chrono::milliseconds timeout, Done done) {
  if (Side* side = side_for(tag))
    start(*side, tag, &tensor, tensor.shape(), tensor.dtype(), timeout, std::move(done));
  else
    host_->send(tag, tensor, timeout, std::move(done));
}

void NcclRemoteChannel::receive(std::uint64_t tag, const Shape& shape, DType dtype,
                                std::chrono::milliseconds timeout, Done done) {
  if (Side* side = side_for(tag))
    start(*side, tag, nullptr, shape, dtype, timeout, std::move(done));
  else
    host_->receive(tag, shape, dtype, timeout, std::move(done));
}

void NcclRemoteChannel::start(Side& side, std::uint64_t tag, const Tensor* to_send,
                              const Shape& shape, DType dtype, std::chrono::milliseconds timeout,
                              Done done) {
  Side::Op op;
  op.done = std::move(done);
  op.deadline = Clock::now() + timeout;
  op.what = (to_send ? "send of " : "receive of ") + describe_tag(tag);
  {
    std::lock_guard lock(side.mutex);
    try {
      if (to_send ? !side.tx : !side.rx)
        throw std::logic_error("nccl: edge '" + side.name + "' does not " +
                               (to_send ? "send" : "receive") + " from this process: " + op.what);
      DeviceGuard guard(side.device);
      // Before queuing: an edge that failed, or whose oldest operation is overdue, throws.
      if (to_send) {
        side.tx->send(*to_send);
        op.tensor = *to_send;
      } else {
        op.tensor = side.rx->receive(shape, dtype);
      }
      op.event = side.take_event();
      const cudaError_t recorded = cudaEventRecord(op.event, side.stream());
      if (recorded != cudaSuccess) {
        side.free_events.push_back(op.event);
        CUDA_CHECK(recorded);
      }
      side.ops.push_back(std::move(op));
    } catch (...) {
      side.refused.emplace_back(std::move(op.done), std::current_exception());
    }
  }
  {
    std::lock_guard lock(mutex_);
    ++pending_;
  }
  wake_.notify_one();
}

// Reports what completed or failed on `side`; true if anything did.
bool NcclRemoteChannel::progress(Side& side) {
  std::vector<std::pair<Done, Tensor>> completed;
  std::vector<std::pair<Done, std::exception_ptr>> failed;
  {
    std::lock_guard lock(side.mutex);
    failed.swap(side.refused);
    if (!side.ops.empty()) {
      try {
        side.poll();  // NCCL's asynchronous error, or the edge's own deadline
        while (!side.ops.empty()) {
          Side::Op& op = side.ops.front();
          const cudaError_t status = cudaEventQuery(op.event);
          if (status == cudaErrorNotReady) {
            (void)cudaGetLastError();
            if (Clock::now() >= op.deadline) side.fail_timeout(op.what);
            break;
          }
          CUDA_CHECK(status);
          side.free_events.push_back(op.event);
          completed.emplace_back(std::move(op.done), std::move(op.tensor));
          side.ops.pop_front();
        }
      } catch (...) {
        // The communicator is aborted (or CUDA failed): nothing queued on it will finish.
        const std::exception_ptr e = std::current_exception();
        for (Side::Op& op : side.ops) {
          side.free_events.push_back(op.event);  // destroyed with the side
          failed.emplace_back(std::move(op.done), e);
        }
        side.ops.clear();
      }
    }
  }
  const std::size_t n = completed.size() + failed.size();
  if (n == 0) return false;
  {
    std::lock_guard lock(mutex_);
    pending_ -= n;
  }
  for (auto& [done, tensor] : completed)
    if (done) done(std::move(tensor), nullptr);
  for (auto& [done, e] : failed)
    if (done) done(Tensor(), e);
  return true;
}

void NcclRemoteChannel::run() {
  PollBackoff backoff;
  std::vector<Side*> sides;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (pending_ == 0) wake_.wait(lock, [&] { return stop_ || pending_ > 0; });
      if (stop_) return;
      sides.clear();
      for (auto& [key, side] : sides_) sides.push_back(side.get());
    }
    bool busy = false;
    for (Side* side : sides) busy = progress(*side) || busy;
    backoff.after_poll(busy);
  }
}

}  // namespace conveyor
