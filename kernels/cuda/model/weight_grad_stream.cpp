#include "kernels/cuda/model/weight_grad_stream.hpp"

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"

namespace conveyor {

WeightGradStream::WeightGradStream(int device) : device_(device), stream_(device) {
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  for (auto& e : marks_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

// Events still pending are released once they complete (cudaEventDestroy's contract); the
// stream's own destructor then waits for its work.
WeightGradStream::~WeightGradStream() {
  DeviceGuard guard(device_);
  (void)cudaEventDestroy(fork_);
  for (auto e : marks_) (void)cudaEventDestroy(e);
}

void WeightGradStream::fork(cudaStream_t compute) {
  CUDA_CHECK(cudaEventRecord(fork_, compute));
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), fork_, 0));
}

int WeightGradStream::mark() {
  const int m = next_;
  next_ = (next_ + 1) % 2;
  CUDA_CHECK(cudaEventRecord(marks_[static_cast<std::size_t>(m)], stream_.get()));
  return m;
}

void WeightGradStream::join(cudaStream_t compute, int mark) {
  CUDA_CHECK(cudaStreamWaitEvent(compute, marks_[static_cast<std::size_t>(mark)], 0));
}

}  // namespace conveyor
