#pragma once
// fault.max_restarts within fault.window_s: how many recoveries a run may make in any
// sliding window before it gives up (a fault that keeps coming back is not transient).
// Pure logic; time is passed in.
#include <chrono>
#include <deque>

namespace conveyor {

class RestartBudget {
 public:
  using Clock = std::chrono::steady_clock;
  /// max_restarts >= 0; window_s > 0.
  RestartBudget(int max_restarts, double window_s);

  /// Counts a recovery at `now` and returns true when it stays within the budget; false
  /// (and nothing counted) when max_restarts recoveries already happened in the window
  /// ending at `now`.
  bool admit(Clock::time_point now);
  /// Recoveries counted in the window ending at `now`.
  int used(Clock::time_point now);
  int max_restarts() const { return max_restarts_; }
  double window_s() const { return window_s_; }

 private:
  void expire(Clock::time_point now);
  int max_restarts_;
  double window_s_;
  std::deque<Clock::time_point> recent_;
};

}  // namespace conveyor
