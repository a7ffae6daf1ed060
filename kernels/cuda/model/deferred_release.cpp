#include "kernels/cuda/model/deferred_release.hpp"

#include <utility>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"

namespace conveyor {

DeferredRelease::DeferredRelease(cudaStream_t stream, int device)
    : stream_(stream), device_(device) {}

DeferredRelease::~DeferredRelease() {
  try {
    drain();
  } catch (...) {
    // A destructor must not throw; a failed sync means the device is lost anyway.
  }
  for (cudaEvent_t e : spare_) (void)cudaEventDestroy(e);
  for (Held& h : held_) (void)cudaEventDestroy(h.done);
}

void DeferredRelease::hold(Tensor tensor) {
  if (!tensor.defined() || tensor.device().is_cpu()) return;
  collect();
  DeviceGuard guard(device_);
  cudaEvent_t e = nullptr;
  if (!spare_.empty()) {
    e = spare_.back();
    spare_.pop_back();
  } else {
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  const cudaError_t status = cudaEventRecord(e, stream_);
  if (status != cudaSuccess) {
    (void)cudaEventDestroy(e);
    CUDA_CHECK(status);
  }
  held_.push_back({std::move(tensor), e});
}

void DeferredRelease::collect() {
  while (!held_.empty()) {
    const cudaError_t status = cudaEventQuery(held_.front().done);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return;
    }
    CUDA_CHECK(status);
    spare_.push_back(held_.front().done);
    held_.pop_front();
  }
}

void DeferredRelease::drain() {
  while (!held_.empty()) {
    CUDA_CHECK(cudaEventSynchronize(held_.front().done));
    spare_.push_back(held_.front().done);
    held_.pop_front();
  }
}

}  // namespace conveyor
