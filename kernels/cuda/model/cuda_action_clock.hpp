#pragma once
// DeviceActionClock (kernels/model/action_clock.hpp) for one CUDA stream: a pair of
// timing events per action from a reused pool, converted to the host steady clock against
// a calibration event. Calibration records an event on the idle stream and synchronises
// on it (µs when idle); it is redone, at most once a second, only when the stream is idle,
// except the first, which waits for the stream once.
// Errors: CudaError from any failed CUDA call.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "kernels/model/action_clock.hpp"

namespace conveyor {

class CudaActionClock final : public DeviceActionClock {
 public:
  /// REQUIRES: `stream` lives on `device` and outlives the clock.
  CudaActionClock(int device, cudaStream_t stream);
  ~CudaActionClock() override;

  std::uint64_t begin() override;
  void end(std::uint64_t token) override;
  std::vector<DeviceSpan> poll() override;
  std::vector<DeviceSpan> drain() override;

 private:
  struct Calibration;
  struct Pending {
    std::uint64_t token = 0;
    cudaEvent_t start = nullptr, end = nullptr;  // end null until end(token)
    std::shared_ptr<const Calibration> calibration;
  };
  cudaEvent_t take_event();
  void calibrate_if_due();
  std::vector<DeviceSpan> collect(bool wait);

  int device_;
  cudaStream_t stream_;
  std::vector<cudaEvent_t> free_events_;
  std::deque<Pending> pending_;  // begin order
  std::shared_ptr<const Calibration> calibration_;
  std::chrono::steady_clock::time_point calibrated_at_;
  std::uint64_t next_token_ = 1;
};

}  // namespace conveyor
