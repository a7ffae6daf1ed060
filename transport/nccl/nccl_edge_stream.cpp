#include "transport/nccl/nccl_edge_stream.hpp"

#include <thread>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"

namespace conveyor {

NcclEdgeStream::NcclEdgeStream(
    int device, const std::function<std::unique_ptr<NcclCommunicator>(cudaStream_t)>& join) {
  DeviceGuard guard(device);
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    comm_ = join(stream_);
  } catch (...) {
    (void)cudaStreamDestroy(stream_);  // the destructor does not run for a failed constructor
    throw;
  }
}

NcclEdgeStream::~NcclEdgeStream() {
  DeviceGuard guard(comm_->device());
  if (!comm_->aborted()) {
    try {
      flush();
    } catch (...) {  // flush aborted the communicator; the kernels exit without the peer
    }
  }
  comm_->abort();
  // After the abort nothing waits for the peer: the stream drains quickly. Give it the
  // timeout, then leak what is left rather than free memory a kernel may still write.
  const auto deadline = Clock::now() + comm_->timeout();
  while (cudaStreamQuery(stream_) == cudaErrorNotReady && Clock::now() < deadline)
    std::this_thread::yield();
  (void)cudaGetLastError();
  const bool drained = cudaStreamQuery(stream_) == cudaSuccess;
  for (Op& op : ops_) {
    (void)cudaEventDestroy(op.done);
    if (!drained) new Tensor(std::move(op.keep_alive));  // deliberate leak, see the header
  }
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  (void)cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

void NcclEdgeStream::release_completed() {
  while (!ops_.empty()) {
    const cudaError_t status = cudaEventQuery(ops_.front().done);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return;
    }
    CUDA_CHECK(status);
    recycle(ops_.front().done);
    ops_.pop_front();
  }
}

void NcclEdgeStream::poll() {
  comm_->check("the edge's last operations");
  release_completed();
  if (!ops_.empty() && Clock::now() - ops_.front().queued > comm_->timeout())
    comm_->fail_timeout(ops_.front().what);
}

void NcclEdgeStream::enqueue(Tensor keep_alive, std::string what) {
  cudaEvent_t done = nullptr;
  if (free_events_.empty()) {
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = free_events_.back();
    free_events_.pop_back();
  }
  const cudaError_t recorded = cudaEventRecord(done, stream_);
  if (recorded != cudaSuccess) {
    recycle(done);
    CUDA_CHECK(recorded);
  }
  ops_.push_back({std::move(keep_alive), done, Clock::now(), std::move(what)});
}

void NcclEdgeStream::flush() {
  while (!ops_.empty()) {
    Op& op = ops_.front();
    comm_->wait(op.done, op.what, op.queued + comm_->timeout());
    recycle(op.done);
    ops_.pop_front();
  }
}

}  // namespace conveyor
