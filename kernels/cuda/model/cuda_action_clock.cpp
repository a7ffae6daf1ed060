#include "kernels/cuda/model/cuda_action_clock.hpp"

#include <stdexcept>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"

namespace conveyor {
namespace {

// "Not ready" from a query is an answer, not an error: keep it out of the thread's last
// error, where the model's next launch check would find it.
void forget_not_ready() {
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
}

using Clock = std::chrono::steady_clock;
constexpr auto kRecalibrateEvery = std::chrono::seconds(1);

std::int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

// A device event whose host time is known: device times are the host time of the
// reference plus the event-to-event elapsed time.
struct CudaActionClock::Calibration {
  cudaEvent_t reference = nullptr;
  std::int64_t host_ns = 0;
  ~Calibration() { (void)cudaEventDestroy(reference); }
  std::int64_t host_time_of(cudaEvent_t e) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, reference, e));
    return host_ns + static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  }
};

CudaActionClock::CudaActionClock(int device, cudaStream_t stream)
    : device_(device), stream_(stream) {}

CudaActionClock::~CudaActionClock() {
  DeviceGuard guard(device_);
  for (auto& p : pending_) {
    (void)cudaEventDestroy(p.start);
    if (p.end) (void)cudaEventDestroy(p.end);
  }
  for (auto e : free_events_) (void)cudaEventDestroy(e);
  calibration_.reset();
}

cudaEvent_t CudaActionClock::take_event() {
  if (!free_events_.empty()) {
    auto e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));  // with timing: cudaEventElapsedTime needs it
  return e;
}

// The event completes as soon as the idle stream reaches it: its host time is taken as the
// midpoint of the record call and the synchronisation's return.
void CudaActionClock::calibrate_if_due() {
  const auto now = Clock::now();
  if (calibration_) {
    if (now - calibrated_at_ < kRecalibrateEvery || !pending_.empty()) return;
    const cudaError_t idle = cudaStreamQuery(stream_);
    forget_not_ready();
    if (idle != cudaSuccess) return;  // busy (or an error the model itself will see)
  }
  auto c = std::make_shared<Calibration>();
  CUDA_CHECK(cudaEventCreate(&c->reference));
  const auto before = Clock::now();
  CUDA_CHECK(cudaEventRecord(c->reference, stream_));
  CUDA_CHECK(cudaEventSynchronize(c->reference));
  const auto after = Clock::now();
  c->host_ns = (ns(before) + ns(after)) / 2;
  calibration_ = std::move(c);
  calibrated_at_ = after;
}

std::uint64_t CudaActionClock::begin() {
  DeviceGuard guard(device_);
  calibrate_if_due();
  Pending p;
  p.token = next_token_++;
  p.start = take_event();
  p.calibration = calibration_;
  CUDA_CHECK(cudaEventRecord(p.start, stream_));
  pending_.push_back(std::move(p));
  return pending_.back().token;
}

void CudaActionClock::end(std::uint64_t token) {
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->token != token) continue;
    if (it->end) break;
    DeviceGuard guard(device_);
    it->end = take_event();
    CUDA_CHECK(cudaEventRecord(it->end, stream_));
    return;
  }
  throw std::logic_error("CudaActionClock::end: action " + std::to_string(token) +
                         " was not begun or has ended already");
}

std::vector<DeviceSpan> CudaActionClock::collect(bool wait) {
  DeviceGuard guard(device_);
  std::vector<DeviceSpan> done;
  while (!pending_.empty() && pending_.front().end) {
    Pending& p = pending_.front();
    if (wait) {
      CUDA_CHECK(cudaEventSynchronize(p.end));
    } else {
      const cudaError_t s = cudaEventQuery(p.end);
      forget_not_ready();
      if (s == cudaErrorNotReady) break;
      CUDA_CHECK(s);
    }
    done.push_back({p.token, p.calibration->host_time_of(p.start),
                    p.calibration->host_time_of(p.end)});
    free_events_.push_back(p.start);
    free_events_.push_back(p.end);
    pending_.pop_front();
  }
  return done;
}

std::vector<DeviceSpan> CudaActionClock::poll() { return collect(false); }
std::vector<DeviceSpan> CudaActionClock::drain() { return collect(true); }

}  // namespace conveyor
