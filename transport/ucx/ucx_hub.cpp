#include "transport/ucx/ucx_hub.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <utility>

#include "transport/poll_backoff.hpp"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

// The longest the hub thread blocks on UCX's events with work in flight: a bound, should
// some event not reach the worker's file descriptor.
constexpr auto kMaxBlock = std::chrono::milliseconds(10);

std::string ms_text(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? std::to_string(ms.count() / 1000) + " s"
                                : std::to_string(ms.count()) + " ms";
}

}  // namespace

struct UcxHub::Op {
  enum class Kind { connect, send, receive } kind = Kind::send;
  int peer = 0;
  std::uint64_t tag = 0;
  Tensor tensor;
  Shape shape;
  DType dtype = DType::f32;
  std::chrono::milliseconds timeout{0};
  Done done;
  std::vector<std::byte> address;  // connect
  std::string name;                // connect
  std::shared_ptr<std::promise<void>> connected;
};

struct UcxHub::InFlight {
  UcxRequest request;
  bool is_send = false;
  std::string what;  // "receive of activation edge 1 ... from node 1"
  std::chrono::milliseconds timeout{0};
  Clock::time_point deadline;
  Done done;
};

UcxHub::UcxHub(UcxOptions options) : options_(std::move(options)) {
  options_.wakeup = true;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);  // -1: the hub polls (PollBackoff sleeps)
  worker_ = std::make_unique<UcxWorker>(options_);
  address_ = worker_->address();
  thread_ = std::thread([this] { run(); });
}

UcxHub::~UcxHub() {
  bool abandoned = false;
  {
    std::lock_guard lock(mutex_);
    abandoned = abandoned_;
  }
  if (!abandoned) drain_sends(options_.timeout);
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake();
  thread_.join();
  in_flight_.clear();  // cancels receives; the worker adopts what UCX still holds
  if (abandoned) worker_->set_close_timeout(std::chrono::milliseconds(100));
  worker_.reset();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void UcxHub::abandon() {
  std::lock_guard lock(mutex_);
  abandoned_ = true;
}

void UcxHub::enqueue(Op op) {
  {
    std::lock_guard lock(mutex_);
    if (op.kind == Op::Kind::send) ++sends_in_flight_;
    queue_.push_back(std::move(op));
  }
  wake();
}

void UcxHub::wake() {
  wake_.notify_one();
  if (wake_fd_ >= 0) {  // the hub thread may be blocked in UcxWorker::wait_for_event
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
  }
}

void UcxHub::connect(int peer, std::vector<std::byte> peer_address, std::string name) {
  Op op;
  op.kind = Op::Kind::connect;
  op.peer = peer;
  op.address = std::move(peer_address);
  op.name = name;
  op.connected = std::make_shared<std::promise<void>>();
  auto connected = op.connected->get_future();
  enqueue(std::move(op));
  if (connected.wait_for(options_.timeout) != std::future_status::ready)
    throw UcxTimeout("ucx: connecting " + options_.name + " to " + name + " took longer than " +
                     ms_text(options_.timeout));
  connected.get();
}

void UcxHub::send(int peer, std::uint64_t tag, Tensor tensor, std::chrono::milliseconds timeout,
                  Done done) {
  Op op;
  op.kind = Op::Kind::send;
  op.peer = peer;
  op.tag = tag;
  op.tensor = std::move(tensor);
  op.timeout = timeout;
  op.done = std::move(done);
  enqueue(std::move(op));
}

void UcxHub::receive(int peer, std::uint64_t tag, Shape shape, DType dtype,
                     std::chrono::milliseconds timeout, Done done) {
  Op op;
  op.kind = Op::Kind::receive;
  op.peer = peer;
  op.tag = tag;
  op.shape = std::move(shape);
  op.dtype = dtype;
  op.timeout = timeout;
  op.done = std::move(done);
  enqueue(std::move(op));
}

bool UcxHub::drain_sends(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return drained_.wait_for(lock, timeout, [&] { return sends_in_flight_ == 0; });
}

void UcxHub::complete(InFlight& f, Tensor t, std::exception_ptr e) {
  if (f.done) f.done(std::move(t), e);
  if (f.is_send) {
    std::lock_guard lock(mutex_);
    if (--sends_in_flight_ == 0) drained_.notify_all();
  }
}

// Runs on the hub thread: starts one queued operation; a failure to start completes it.
void UcxHub::post(Op& op) {
  if (op.kind == Op::Kind::connect) {
    try {
      endpoints_[op.peer] = &worker_->connect(op.address, op.name);
      op.connected->set_value();
    } catch (...) {
      op.connected->set_exception(std::current_exception());
    }
    return;
  }
  InFlight f;
  f.is_send = op.kind == Op::Kind::send;
  f.timeout = op.timeout;
  f.deadline = Clock::now() + op.timeout;
  f.done = std::move(op.done);
  try {
    auto ep = endpoints_.find(op.peer);
    if (ep == endpoints_.end())
      throw UcxError("ucx: " + options_.name + " has no connection to peer " +
                     std::to_string(op.peer) + " for " + describe_tag(op.tag));
    f.what = (f.is_send ? "send of " : "receive of ") + describe_tag(op.tag) +
             (f.is_send ? " to " : " from ") + ep->second->peer();
    f.request = f.is_send ? ep->second->post_send(op.tag, op.tensor)
                          : ep->second->post_receive(op.tag, op.shape, op.dtype);
  } catch (...) {
    complete(f, {}, std::current_exception());
    return;
  }
  in_flight_.push_back(std::move(f));
}

void UcxHub::run() {
  PollBackoff backoff;
  for (;;) {
    std::vector<Op> ops;
    {
      std::unique_lock lock(mutex_);
      if (queue_.empty() && in_flight_.empty())
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty()) return;  // the destructor drained the sends
      ops.swap(queue_);
    }
    for (auto& op : ops) post(op);
    bool busy = worker_->progress() || !ops.empty();
    const auto now = Clock::now();
    for (std::size_t i = 0; i < in_flight_.size();) {
      InFlight& f = in_flight_[i];
      if (f.request.done()) {
        Tensor t;
        std::exception_ptr e;
        try {
          t = f.request.wait(std::chrono::milliseconds(0));
        } catch (...) {
          e = std::current_exception();
        }
        complete(f, std::move(t), e);
      } else if (now >= f.deadline) {
        f.request = UcxRequest{};  // cancels a receive; a send's buffer stays with the worker
        complete(f, {},
                 std::make_exception_ptr(UcxTimeout("ucx: " + f.what + " did not complete within " +
                                                    ms_text(f.timeout) + " on " +
                                                    options_.name)));
      } else {
        ++i;
        continue;
      }
      in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
      busy = true;
    }
    // Blocks until UCX has work or an op is queued, but no longer than the nearest
    // deadline (checked above) nor kMaxBlock.
    backoff.after_poll(busy, [&] {
      auto until = Clock::now() + kMaxBlock;
      for (const auto& f : in_flight_) until = std::min(until, f.deadline);
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
      const bool waited = worker_->wait_for_event(std::max(left, std::chrono::microseconds(0)), wake_fd_);
      // The wake-ups are spent after the wait and before the queue is next taken, so that
      // an op queued after that wakes the next wait; only here, not on every poll (a read
      // per iteration of a busy loop is a system call per iteration).
      if (waited && wake_fd_ >= 0) {
        std::uint64_t count = 0;
        [[maybe_unused]] const auto n = ::read(wake_fd_, &count, sizeof count);
      }
      return waited;
    });
  }
}

}  // namespace conveyor
