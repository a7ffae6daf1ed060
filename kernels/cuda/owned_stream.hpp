#pragma once
// RAII: a non-blocking CUDA stream created on `device`; destroyed after a final sync, so
// work still queued on it finishes before anything it reads (declared before the stream
// in the owner) is freed.
#include <cuda_runtime_api.h>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"

namespace conveyor {

class OwnedStream {
 public:
  explicit OwnedStream(int device) : device_(device) {
    DeviceGuard guard(device_);
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~OwnedStream() {
    DeviceGuard guard(device_);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace conveyor
