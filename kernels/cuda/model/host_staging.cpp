#include "kernels/cuda/model/host_staging.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"

namespace conveyor {

HostStaging::HostStaging(cudaStream_t stream, int device) : stream_(stream), device_(device) {}

HostStaging::~HostStaging() {
  for (Slot& s : slots_) {
    (void)cudaEventSynchronize(s.done);
    (void)cudaEventDestroy(s.done);
  }
}

Tensor HostStaging::upload(const Tensor& src, std::string_view label) {
  if (!src.defined() || !src.device().is_cpu())
    throw std::invalid_argument("HostStaging::upload: need a host tensor, got " + src.describe());
  DeviceGuard guard(device_);
  const std::size_t bytes = src.bytes();
  Slot* slot = nullptr;
  for (Slot& s : slots_) {
    if (s.pinned.bytes() < bytes) continue;
    const cudaError_t status = cudaEventQuery(s.done);  // never recorded: cudaSuccess
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      continue;
    }
    CUDA_CHECK(status);
    slot = &s;
    break;
  }
  if (!slot) {
    Slot s;
    // At least 64 KiB so that one buffer serves the usual (B, T) ids of any step.
    const std::size_t capacity = std::max<std::size_t>(bytes, std::size_t{64} << 10);
    s.pinned = zeros_pinned({static_cast<std::int64_t>((capacity + 3) / 4)}, DType::i32);
    CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    slots_.push_back(std::move(s));
    slot = &slots_.back();
  }
  std::memcpy(slot->pinned.raw(), src.raw(), bytes);
  Tensor dst = empty_cuda(src.shape(), src.dtype(), device_, stream_, label);
  if (bytes > 0)
    CUDA_CHECK(cudaMemcpyAsync(dst.raw(), slot->pinned.raw(), bytes, cudaMemcpyHostToDevice,
                               stream_));
  CUDA_CHECK(cudaEventRecord(slot->done, stream_));
  return dst;
}

}  // namespace conveyor
