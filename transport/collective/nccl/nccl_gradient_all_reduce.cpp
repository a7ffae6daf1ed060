#include "transport/collective/nccl/nccl_gradient_all_reduce.hpp"

#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "kernels/cuda/owned_stream.hpp"
#include "transport/collective/collective_error.hpp"
#include "transport/collective/layout_agreement.hpp"
#include "transport/collective/store_polling.hpp"
#include "transport/nccl/nccl_communicator.hpp"

namespace conveyor {
namespace {

constexpr const char* kRebuild = "; the group is broken: rebuild it (next generation) on every rank";
constexpr const char* kCancelled =
    "cancelled: a recovery began (a replica failed or left), every stage group is rebuilt";

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: break;
  }
  throw std::invalid_argument("collective: nccl reduces f32 and bf16 gradients, not " +
                              std::string(dtype_name(dtype)));
}

// An NCCL failure as the group's error: NcclTimeout (a peer did not take part in time)
// becomes CollectiveTimeout, any other NcclError or CudaError a CollectiveError.
[[noreturn]] void rethrow_as_collective(const std::string& where) {
  try {
    throw;
  } catch (const NcclTimeout& e) {
    throw CollectiveTimeout(where + ": " + e.what() + kRebuild);
  } catch (const NcclError& e) {
    throw CollectiveError(where + ": " + e.what() + kRebuild);
  } catch (const CudaError& e) {
    throw CollectiveError(where + ": " + e.what());
  }
}

class CudaEvent {
 public:
  explicit CudaEvent(int device, bool timing = false) : device_(device) {
    CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() {
    DeviceGuard guard(device_);
    (void)cudaEventDestroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

class NcclPendingBucket final : public AllReduceHandle {
 public:
  NcclPendingBucket(NcclCommunicator* comm, int device, std::string what,
                    std::chrono::milliseconds timeout, std::function<bool()> cancelled)
      : comm_(comm),
        device_(device),
        what_(std::move(what)),
        timeout_(timeout),
        cancelled_(std::move(cancelled)),
        began_(device, true),
        event_(device, true) {}

  // Recorded on the group's stream before and after the bucket's all-reduces.
  cudaEvent_t began() const { return began_.get(); }
  cudaEvent_t event() const { return event_.get(); }

  double elapsed_ms() const override {
    if (!completed_) return 0.0;
    DeviceGuard guard(device_);
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, began_.get(), event_.get()));
    return ms;
  }

  void wait() override {
    if (completed_) return;
    DeviceGuard guard(device_);
    try {
      if (comm_) {
        comm_->wait(event_.get(), what_, NcclCommunicator::Clock::now() + timeout_, cancelled_,
                    kCancelled);
      } else {
        CUDA_CHECK(cudaEventSynchronize(event_.get()));  // no peer: only local work to wait for
      }
    } catch (...) {
      rethrow_as_collective(what_);
    }
    completed_ = true;
  }

  bool done() override {
    if (completed_) return true;
    DeviceGuard guard(device_);
    try {
      const cudaError_t status = cudaEventQuery(event_.get());
      if (status == cudaErrorNotReady) {
        (void)cudaGetLastError();  // "not ready" is an answer, not an error to keep
        if (comm_) {
          comm_->check(what_);
          if (cancelled_ && cancelled_()) comm_->fail_cancelled(what_, kCancelled);
        }
        return false;
      }
      CUDA_CHECK(status);
    } catch (...) {
      rethrow_as_collective(what_);
    }
    completed_ = true;
    return true;
  }

 private:
  NcclCommunicator* comm_;  // null for a group of one
  int device_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  std::function<bool()> cancelled_;  // empty: never
  CudaEvent began_;
  CudaEvent event_;
  bool completed_ = false;
};

}  // namespace

struct NcclGradientAllReduce::Impl {
  NcclGroupOptions options;
  // The group's own stream when the caller gives none: destroyed after the communicator.
  std::unique_ptr<OwnedStream> own_stream;
  std::unique_ptr<NcclCommunicator> comm;

  Impl(RendezvousClient& store, NcclGroupOptions o) : options(std::move(o)) {
    const StageGroup& group = options.group;
    group.validate();
    if (!options.stream) {
      own_stream = std::make_unique<OwnedStream>(options.device);
      options.stream = own_stream->get();
    }
    for (const auto& shape : options.layout) (void)nccl_type(shape.dtype);
    if (options.timeout <= std::chrono::milliseconds(0))
      throw std::invalid_argument(group.describe() + ": the timeout must be positive");
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    agree_on_layout(store, group, options.layout, options.reduction, options.timeout);
    if (group.size > 1) connect(store, deadline);
  }

  std::string describe() const {
    return options.group.describe() + " on cuda:" + std::to_string(options.device);
  }

  ncclUniqueId exchange_id(RendezvousClient& store,
                           std::chrono::steady_clock::time_point deadline) {
    const std::string key = options.group.store_prefix() + "nccl-id";
    ncclUniqueId id;
    if (options.group.rank == 0) {
      id = NcclCommunicator::new_id();
      store.set(key, std::span(reinterpret_cast<const std::uint8_t*>(&id), sizeof id));
      return id;
    }
    const auto value = poll_keys(store, {key}, deadline)[0];
    if (!value)
      throw CollectiveTimeout(describe() + ": rank 0 published no NCCL id under '" + key +
                              "' within " + rendezvous::describe_duration(options.timeout));
    if (value->size() != sizeof id)
      throw CollectiveError(describe() + ": '" + key + "' holds " +
                            std::to_string(value->size()) + " bytes, not a " +
                            std::to_string(sizeof id) + "-byte NCCL unique id");
    std::memcpy(&id, value->data(), sizeof id);
    return id;
  }

  void connect(RendezvousClient& store, std::chrono::steady_clock::time_point deadline) {
    const ncclUniqueId id = exchange_id(store, deadline);
    DeviceGuard guard(options.device);
    try {
      cudaStream_t stream = options.stream;
      Tensor probe = zeros_cuda(Shape{1}, DType::f32, options.device, stream, "collective probe");
      comm = std::make_unique<NcclCommunicator>(
          id, options.group.rank, options.device, options.group.name, options.timeout,
          [probe, stream](ncclComm_t c) mutable {
            NCCL_CHECK(ncclAllReduce(probe.raw(), probe.raw(), 1, ncclFloat32, ncclSum, c, stream));
          },
          options.group.size);
      CudaEvent connected(options.device);
      CUDA_CHECK(cudaEventRecord(connected.get(), stream));
      comm->wait(connected.get(), "the group's first all-reduce",
                 NcclCommunicator::Clock::now() + options.timeout);
    } catch (...) {
      rethrow_as_collective(describe() + ": joining the NCCL communicator");
    }
  }

  std::unique_ptr<AllReduceHandle> start(const GradientBucket& bucket) {
    check_bucket(bucket, options.layout, options.group.describe());
    const std::string what = describe() + ": bucket " + std::to_string(bucket.index) + " (" +
                             std::to_string(bucket.elements()) + " " +
                             std::string(dtype_name(options.layout[bucket.index].dtype)) + ")";
    if (comm && comm->aborted())
      throw CollectiveError(what + ": not started: an earlier bucket failed" + kRebuild);
    DeviceGuard guard(options.device);
    std::function<bool()> cancelled;
    if (options.cancellation)
      cancelled = [c = options.cancellation, g = options.group.generation] {
        return c->cancelled(g);
      };
    auto handle = std::make_unique<NcclPendingBucket>(comm.get(), options.device, what,
                                                      options.timeout, std::move(cancelled));
    try {
      CUDA_CHECK(cudaEventRecord(handle->began(), options.stream));
      if (comm && bucket.elements() > 0) enqueue(bucket);
      CUDA_CHECK(cudaEventRecord(handle->event(), options.stream));
    } catch (...) {
      rethrow_as_collective(what);
    }
    return handle;
  }

  void enqueue(const GradientBucket& bucket) {
    const ncclRedOp_t op = options.reduction == Reduction::average ? ncclAvg : ncclSum;
    const ncclDataType_t type = nccl_type(options.layout[bucket.index].dtype);
    NCCL_CHECK_COMM(*comm, ncclGroupStart());
    for (const auto& b : bucket.buffers) {
      if (b.count == 0) continue;
      NCCL_CHECK_COMM(*comm, ncclAllReduce(b.data, b.data, b.count, type, op, comm->get(),
                                           options.stream));
    }
    NCCL_CHECK_COMM(*comm, ncclGroupEnd());
  }

  std::unique_ptr<AllReduceHandle> start_after(const GradientBucket& bucket, cudaStream_t producer) {
    if (producer) {
      DeviceGuard guard(options.device);
      if (!written) written = std::make_unique<CudaEvent>(options.device);
      CUDA_CHECK(cudaEventRecord(written->get(), producer));
      CUDA_CHECK(cudaStreamWaitEvent(options.stream, written->get(), 0));
    }
    return start(bucket);
  }

  // Reused by start_after: a stream wait captures the event's state when it is queued.
  std::unique_ptr<CudaEvent> written;

  void wait_on_device(cudaStream_t consumer) {
    DeviceGuard guard(options.device);
    CudaEvent queued(options.device);
    CUDA_CHECK(cudaEventRecord(queued.get(), options.stream));
    CUDA_CHECK(cudaStreamWaitEvent(consumer, queued.get(), 0));
  }
};

NcclGradientAllReduce::NcclGradientAllReduce(RendezvousClient& store, NcclGroupOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {}

NcclGradientAllReduce::~NcclGradientAllReduce() = default;

std::unique_ptr<AllReduceHandle> NcclGradientAllReduce::start(const GradientBucket& bucket) {
  return impl_->start(bucket);
}

std::unique_ptr<AllReduceHandle> NcclGradientAllReduce::start_after(const GradientBucket& bucket,
                                                                    void* producer) {
  return impl_->start_after(bucket, static_cast<cudaStream_t>(producer));
}

void NcclGradientAllReduce::wait_on_device(cudaStream_t consumer) {
  impl_->wait_on_device(consumer);
}

const StageGroup& NcclGradientAllReduce::group() const { return impl_->options.group; }
const BucketLayout& NcclGradientAllReduce::layout() const { return impl_->options.layout; }

}  // namespace conveyor
