#pragma once
// Keeps a storm of like log lines (one per dropped or refused connection: a port scan,
// thousands of idle connections, a flood of wrong tokens) from flooding stderr while a
// lone event is still logged in full: in each window the first `burst` lines pass as
// they are, the rest are only counted, and once the window is over one line says how
// many were held back and shows the last of them.
//
// Bound: at most burst + 1 lines per window, and a window opens only when a line comes.
// Pure (time is passed in) and not thread-safe: the server's io thread owns it.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace conveyor::rendezvous {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  /// `what` names the held-back lines in the summary ("dropped or refused connections").
  /// REQUIRES: burst >= 1, window > 0.
  LogThrottle(std::string what, std::size_t burst, Clock::duration window);

  /// The lines to write now for `line`, seen at `now`: the summary of an ended window
  /// first, then `line` itself while this window's burst lasts (nothing once it is spent).
  std::vector<std::string> add(std::string line, Clock::time_point now);

  /// The summary of the lines held back, once their window is over or when `force` (the
  /// log ends); nullopt when nothing was held back or the window is still open.
  /// "rendezvous: 295 more dropped or refused connections in 10 s, not logged one by one;
  /// the last: dropped 127.0.0.1:40312: ..."
  std::optional<std::string> flush(Clock::time_point now, bool force = false);

 private:
  std::string what_;
  std::size_t burst_;
  Clock::duration window_;
  std::optional<Clock::time_point> window_start_;  // no open window without a line
  std::size_t passed_ = 0;  // lines written in the open window
  std::size_t held_ = 0;    // lines counted instead
  std::string last_held_;
};

}  // namespace conveyor::rendezvous
