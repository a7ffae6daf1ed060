#pragma once
// When a stage's actions ran on its device. A CPU stage computes inside the call, so the
// host clock around the call is the truth and no clock is needed. A GPU stage only
// enqueues work: the host times say when an action was queued, not when it ran. Its model
// brackets each action with device events (begin/end on the model's stream, a few
// hundred ns each) and converts them to the host steady clock later, off the hot path.
//
// Usage (the trace probe): token = begin(); ...the action's launches...; end(token);
// later poll() hands back the spans the device has finished; drain() waits for the rest.
// Times are ns on std::chrono::steady_clock, comparable with host timestamps to within the
// calibration error (a few µs; the clock recalibrates while the stream is idle).
// Thread-safety: one thread at a time (the stage actor's), like the model.
#include <cstdint>
#include <vector>

namespace conveyor {

struct DeviceSpan {
  std::uint64_t token = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

class DeviceActionClock {
 public:
  virtual ~DeviceActionClock() = default;
  /// Marks an action's start on the device's queue; the token names it.
  virtual std::uint64_t begin() = 0;
  /// Marks the end of the action `token` (REQUIRES: begun, not yet ended).
  virtual void end(std::uint64_t token) = 0;
  /// Every ended action the device has finished since the last poll/drain, in begin
  /// order. Never blocks.
  virtual std::vector<DeviceSpan> poll() = 0;
  /// Waits for every ended action, then as poll().
  virtual std::vector<DeviceSpan> drain() = 0;
};

}  // namespace conveyor
