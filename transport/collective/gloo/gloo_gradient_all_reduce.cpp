#include "transport/collective/gloo/gloo_gradient_all_reduce.hpp"

#include <atomic>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "transport/collective/collective_error.hpp"
#include "transport/collective/completion.hpp"
#include "transport/collective/gloo/gloo_peer_sockets.hpp"
#include "transport/collective/gloo/gloo_rendezvous_store.hpp"
#include "transport/collective/gloo/host_bucket_staging.hpp"
#include "transport/collective/gloo/sigpipe_block.hpp"
#include "transport/collective/layout_agreement.hpp"

namespace conveyor {
namespace {

constexpr const char* kRebuild = "; the group is broken: rebuild it (next generation) on every rank";
constexpr const char* kCancelled =
    "cancelled: a recovery began (a replica failed or left), every stage group is rebuilt";
// How often the watcher looks at the cancellation while an operation is in flight.
constexpr std::chrono::milliseconds kWatchEvery{50};

// Gloo reports a peer that did not take part in time as an IoException whose text says so;
// its other failures (a closed connection, a protocol error) are plain errors.
bool is_gloo_timeout(const std::exception& e) {
  return dynamic_cast<const gloo::IoException*>(&e) != nullptr &&
         std::string_view(e.what()).find("Timed out") != std::string_view::npos;
}

class GlooPendingBucket final : public AllReduceHandle {
 public:
  GlooPendingBucket(std::shared_ptr<Completion> completion,
                    std::shared_ptr<const std::atomic<double>> elapsed_ms)
      : completion_(std::move(completion)), elapsed_ms_(std::move(elapsed_ms)) {}
  void wait() override { completion_->wait(); }
  bool done() override { return completion_->done(); }
  double elapsed_ms() const override { return elapsed_ms_->load(); }

 private:
  std::shared_ptr<Completion> completion_;
  std::shared_ptr<const std::atomic<double>> elapsed_ms_;
};

struct Operation {
  GradientBucket bucket;
  std::shared_ptr<Completion> completion;
  // How long reduce() ran; written by the worker before the completion is signalled.
  std::shared_ptr<std::atomic<double>> elapsed_ms;
};

}  // namespace

struct GlooGradientAllReduce::Impl {
  GlooGroupOptions options;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  // The flat array of each bucket of several buffers, made on its first use; touched by
  // the worker thread only.
  std::vector<std::vector<float>> staging;
  // Duplicates of the connections' sockets (size > 1): shut down to end the operation in
  // flight when the generation is cancelled, and whenever the group breaks.
  GlooPeerSockets sockets;

  std::mutex mu;  // guards the members below
  std::condition_variable work;     // the worker: a bucket queued, or stopping
  std::condition_variable watched;  // the watcher: an operation began or ended, or stopping
  std::deque<Operation> queue;
  std::vector<bool> in_flight;  // per bucket: started and not yet finished
  bool gathering = false;       // an all-gather runs (on its caller's thread)
  // The output buffer of the operation now inside Gloo (null: none); its owner clears it
  // before destroying it.
  gloo::transport::UnboundBuffer* in_gloo = nullptr;
  bool cancelled = false;  // the watcher saw the cancellation and ended the connections
  std::string broken;      // the failure that broke the group; empty while healthy
  bool stopping = false;
  std::thread worker;
  std::thread watcher;  // only with options.cancellation and size > 1

  Impl(RendezvousClient& store, GlooGroupOptions o) : options(std::move(o)) {
    const StageGroup& group = options.group;
    group.validate();
    for (std::size_t i = 0; i < options.layout.size(); ++i)
      if (options.layout[i].dtype != DType::f32)
        throw std::invalid_argument(group.describe() + ": bucket " + std::to_string(i) + " is " +
                                    std::string(dtype_name(options.layout[i].dtype)) +
                                    "; the Gloo group reduces f32 host buffers");
    if (options.timeout <= std::chrono::milliseconds(0))
      throw std::invalid_argument(group.describe() + ": the timeout must be positive");
    staging.resize(options.layout.size());
    in_flight.assign(options.layout.size(), false);

    agree_on_layout(store, group, options.layout, options.reduction, options.timeout);
    if (group.size > 1) connect(store);
    worker = std::thread([this] { run(); });
    if (options.cancellation && group.size > 1) watcher = std::thread([this] { watch(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    work.notify_all();
    watched.notify_all();
    worker.join();  // the watcher still ends a running bucket of a cancelled generation
    if (watcher.joinable()) watcher.join();
    sockets = GlooPeerSockets();  // so that the pairs' close below ends the connections
    context.reset();  // closes the pairs: peers still waiting on this rank fail at once
    device.reset();
  }

  void connect(RendezvousClient& store) {
    const StageGroup& group = options.group;
    SigpipeBlock no_sigpipe;  // the device's I/O thread, made below, inherits it
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = options.listen_address;
      device = gloo::transport::tcp::CreateDevice(attr);
      context = std::make_shared<gloo::rendezvous::Context>(group.rank, group.size);
      context->setTimeout(options.timeout);
      GlooRendezvousStore addresses(store, group.store_prefix() + "gloo/", options.timeout);
      context->connectFullMesh(addresses, device);
      take_sockets();
    } catch (const CollectiveTimeout& e) {
      throw CollectiveTimeout(group.describe() + ": connecting to the peers: " + e.what());
    } catch (const std::exception& e) {
      const std::string text = group.describe() + ": connecting to the peers over TCP from " +
                               options.listen_address + ": " + e.what();
      if (is_gloo_timeout(e)) throw CollectiveTimeout(text);
      throw CollectiveError(text);
    }
  }

  // The group works without its sockets' duplicates, only not cancellable: a bucket
  // waiting for a frozen peer then waits out its timeout, as before cancellation existed.
  void take_sockets() {
    try {
      sockets = GlooPeerSockets::take(*context);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "conveyor: %s: %s; a recovery cannot cancel this group's buckets (they "
                           "end at transport.timeout_s)\n",
                   options.group.describe().c_str(), e.what());
    }
  }

  std::string describe(const GradientBucket& bucket) const {
    return options.group.describe() + ": bucket " + std::to_string(bucket.index) + " (" +
           std::to_string(bucket.elements()) + " f32)";
  }

  bool generation_cancelled() const {
    return options.cancellation && options.cancellation->cancelled(options.group.generation);
  }

  // REQUIRES: mu held. A cancelled generation breaks the group before anything is sent.
  void refuse_if_cancelled() {
    if (broken.empty() && generation_cancelled())
      broken = std::string("the generation was ") + kCancelled;
  }

  std::unique_ptr<AllReduceHandle> start(const GradientBucket& bucket) {
    check_bucket(bucket, options.layout, options.group.describe());
    auto completion = std::make_shared<Completion>();
    auto elapsed_ms = std::make_shared<std::atomic<double>>(0.0);
    {
      std::lock_guard lock(mu);
      refuse_if_cancelled();
      if (!broken.empty())
        throw CollectiveError(describe(bucket) + ": not started: " + broken);
      if (in_flight[bucket.index])
        throw std::logic_error(describe(bucket) +
                               ": started again before its previous all-reduce completed");
      in_flight[bucket.index] = true;
      queue.push_back({bucket, completion, elapsed_ms});
    }
    work.notify_one();
    watched.notify_one();
    return std::make_unique<GlooPendingBucket>(std::move(completion), std::move(elapsed_ms));
  }

  // REQUIRES: mu held.
  bool busy() const {
    return gathering || std::find(in_flight.begin(), in_flight.end(), true) != in_flight.end();
  }

  // The watcher thread: while an operation is queued or running, looks at the cancellation
  // every kWatchEvery. Once the generation is cancelled it shuts the connections down:
  // Gloo then fails the pending operations of every pair at once (gloo_peer_sockets.hpp).
  // Gloo misses one kind (a send of ours still being written to the socket, found in
  // scratch runs where both ends were mid-transfer): its wait on the operation's output
  // buffer is ended with abortWaitSend/abortWaitRecv, from then on at every look while
  // the operation stays inside Gloo; Gloo then fails at its next send or receive, on the
  // closed pair. The operation fails as cancelled however Gloo returns (was_cancelled).
  void watch() {
    std::unique_lock lock(mu);
    for (;;) {
      if (!busy()) {
        if (stopping) return;
        watched.wait(lock);
        continue;
      }
      if (!cancelled && generation_cancelled()) {
        cancelled = true;
        if (broken.empty()) broken = std::string("the generation was ") + kCancelled;
        lock.unlock();
        sockets.shut_down();
        lock.lock();
      } else if (cancelled && in_gloo) {
        in_gloo->abortWaitSend();
        in_gloo->abortWaitRecv();
      }
      watched.wait_for(lock, kWatchEvery);
    }
  }

  // Publishes `buffer` (the output of the operation about to enter Gloo) to the watcher
  // until destroyed. REQUIRES: destroyed before the buffer.
  class InGloo {
   public:
    InGloo(Impl& impl, gloo::transport::UnboundBuffer* buffer) : impl_(impl) {
      std::lock_guard lock(impl_.mu);
      impl_.in_gloo = buffer;
    }
    ~InGloo() {
      std::lock_guard lock(impl_.mu);
      impl_.in_gloo = nullptr;
    }
    InGloo(const InGloo&) = delete;
    InGloo& operator=(const InGloo&) = delete;

   private:
    Impl& impl_;
  };

  // After an operation left Gloo: whether the watcher cancelled it, in which case it fails
  // as cancelled even if Gloo returned normally (an aborted wait lets Gloo go on, and the
  // peers may not have their part).
  bool was_cancelled() {
    std::lock_guard lock(mu);
    return cancelled;
  }

  void run() {
    SigpipeBlock no_sigpipe;  // gloo::allreduce writes to the peers' sockets from here
    for (;;) {
      Operation op;
      std::string broken_by;
      {
        std::unique_lock lock(mu);
        work.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping, nothing left
        op = std::move(queue.front());
        queue.pop_front();
        refuse_if_cancelled();
        broken_by = !broken.empty() ? broken : stopping ? "the group was destroyed before it ran" : "";
      }
      if (!broken_by.empty()) {
        finish(op, std::make_exception_ptr(
                       CollectiveError(describe(op.bucket) + ": not run: " + broken_by)));
        continue;
      }
      std::exception_ptr error;
      const auto began = std::chrono::steady_clock::now();
      try {
        reduce(op.bucket);
        op.elapsed_ms->store(std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - began)
                                 .count());
      } catch (const std::exception& e) {
        error = break_group(describe(op.bucket), "bucket " + std::to_string(op.bucket.index), e);
      }
      if (was_cancelled()) error = cancelled_error(describe(op.bucket));
      finish(op, error);
    }
  }

  // A Gloo failure of `what` (named `short_name` in later refusals) breaks the group for
  // good: records why, and returns the error to raise (a timeout or a plain failure).
  std::exception_ptr break_group(const std::string& what, const std::string& short_name,
                                 const std::exception& e) {
    {
      std::lock_guard lock(mu);
      if (broken.empty()) broken = short_name + " failed earlier (" + e.what() + ")";
    }
    sockets.shut_down();  // Gloo closed its descriptors; our duplicates keep the sockets
    const std::string text = what + ": " + e.what() + kRebuild;
    return is_gloo_timeout(e) ? std::make_exception_ptr(CollectiveTimeout(text))
                              : std::make_exception_ptr(CollectiveError(text));
  }

  // The failure of an operation that was in flight when its generation was cancelled.
  static std::exception_ptr cancelled_error(const std::string& what) {
    return std::make_exception_ptr(CollectiveError(what + ": " + kCancelled + kRebuild));
  }

  // The bucket is free for the next start() before its waiter wakes up.
  void finish(Operation& op, std::exception_ptr error) {
    {
      std::lock_guard lock(mu);
      in_flight[op.bucket.index] = false;
    }
    watched.notify_one();
    if (error) {
      op.completion->fail(std::move(error));
    } else {
      op.completion->succeed();
    }
  }

  void all_gather(const std::vector<GradientBuffer>& buffers,
                  const std::vector<std::size_t>& counts) {
    const StageGroup& group = options.group;
    const GradientBucket all{options.layout.size(), buffers};  // an index no bucket has
    const std::size_t n = all.elements();
    if (counts.size() != static_cast<std::size_t>(group.size) ||
        std::accumulate(counts.begin(), counts.end(), std::size_t{0}) != n)
      throw std::invalid_argument(group.describe() + ": all-gather of " + std::to_string(n) +
                                  " elements in " + std::to_string(counts.size()) +
                                  " parts that do not add up to them, one per rank");
    for (const GradientBuffer& b : buffers)
      if (b.dtype != DType::f32 || (b.count > 0 && !b.data))
        throw std::invalid_argument(group.describe() +
                                    ": the all-gather takes f32 host buffers only");
    const std::string what = group.describe() + ": all-gather of " + std::to_string(n) + " f32";
    {
      std::lock_guard lock(mu);
      refuse_if_cancelled();
      if (!broken.empty())
        throw CollectiveError(group.describe() + ": all-gather not started: " + broken);
      // The worker thread uses the context for buckets: it must be idle.
      if (busy())
        throw std::logic_error(group.describe() + ": all-gather while buckets are in flight");
      if (group.size > 1 && n > 0) gathering = true;
    }
    if (group.size == 1 || n == 0) return;
    watched.notify_one();
    struct Gathered {  // the watcher stops watching when the all-gather ends, however
      Impl& impl;
      ~Gathered() {
        {
          std::lock_guard lock(impl.mu);
          impl.gathering = false;
        }
        impl.watched.notify_one();
      }
    } gathered_guard{*this};
    SigpipeBlock no_sigpipe;
    // One buffer is gathered in place: Gloo's allgatherv without an input takes this
    // rank's part as already in the output, so the (large: a shrunk job's gradient
    // shares, share_gradients.hpp) buffer is neither staged nor copied back.
    const bool in_place = buffers.size() == 1;
    std::vector<float> flat, gathered;
    float* out = static_cast<float*>(buffers[0].data);
    if (!in_place) {
      flat.resize(n);
      gathered.resize(n);
      pack_bucket(all, flat);
      out = gathered.data();
    }
    const std::size_t mine =
        std::accumulate(counts.begin(), counts.begin() + group.rank, std::size_t{0});
    std::exception_ptr error;
    try {
      gloo::AllgathervOptions gather(context);
      if (!in_place) gather.setInput(flat.data() + mine, counts[static_cast<std::size_t>(group.rank)]);
      auto output = context->createUnboundBuffer(out, n * sizeof(float));
      InGloo published(*this, output.get());  // declared after `gather`: destroyed first
      gather.setOutput<float>(std::move(output), counts);
      gather.setTag(static_cast<std::uint32_t>(options.layout.size()));
      gather.setTimeout(options.timeout);
      gloo::allgatherv(gather);
    } catch (const std::exception& e) {
      error = break_group(what, "an all-gather", e);
    }
    if (was_cancelled()) error = cancelled_error(what);
    if (error) std::rethrow_exception(error);
    if (!in_place) unpack_bucket(gathered, all, 1.0f);
  }

  void reduce(const GradientBucket& bucket) {
    const std::size_t n = bucket.elements();
    const float divisor =
        options.reduction == Reduction::average ? static_cast<float>(options.group.size) : 1.0f;
    if (n == 0 || options.group.size == 1) return;  // x / 1 == x: nothing to do
    const bool in_place = bucket.buffers.size() == 1;
    float* values = nullptr;
    if (in_place) {
      values = static_cast<float*>(bucket.buffers[0].data);
    } else {
      auto& flat = staging[bucket.index];
      flat.resize(n);
      pack_bucket(bucket, flat);
      values = flat.data();
    }
    gloo::AllreduceOptions all_reduce(context);
    auto output = context->createUnboundBuffer(values, n * sizeof(float));
    InGloo published(*this, output.get());  // declared after all_reduce: destroyed first
    all_reduce.setOutput<float>(std::move(output));  // no input: reduced in place
    all_reduce.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>));
    // Ring, named rather than left to Gloo's choice: its summation order is fixed by R and
    // n, and each sum is computed on one rank and copied to the others (see the header).
    all_reduce.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    all_reduce.setTag(static_cast<std::uint32_t>(bucket.index));
    all_reduce.setTimeout(options.timeout);
    gloo::allreduce(all_reduce);
    if (in_place) {
      divide_in_place({values, n}, divisor);
    } else {
      unpack_bucket(staging[bucket.index], bucket, divisor);
    }
  }
};

GlooGradientAllReduce::GlooGradientAllReduce(RendezvousClient& store, GlooGroupOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {}

GlooGradientAllReduce::~GlooGradientAllReduce() = default;

std::unique_ptr<AllReduceHandle> GlooGradientAllReduce::start(const GradientBucket& bucket) {
  return impl_->start(bucket);
}

void GlooGradientAllReduce::all_gather(const std::vector<GradientBuffer>& buffers,
                                       const std::vector<std::size_t>& counts) {
  impl_->all_gather(buffers, counts);
}

const StageGroup& GlooGradientAllReduce::group() const { return impl_->options.group; }
const BucketLayout& GlooGradientAllReduce::layout() const { return impl_->options.layout; }

}  // namespace conveyor
