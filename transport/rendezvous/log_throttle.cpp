#include "transport/rendezvous/log_throttle.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>
#include <utility>

#include "transport/rendezvous/error.hpp"

namespace conveyor::rendezvous {

LogThrottle::LogThrottle(std::string what, std::size_t burst, Clock::duration window)
    : what_(std::move(what)), burst_(burst), window_(window) {
  if (burst < 1 || window <= Clock::duration::zero())
    throw std::invalid_argument("LogThrottle: needs a burst of at least 1 line and a window > 0");
}

std::vector<std::string> LogThrottle::add(std::string line, Clock::time_point now) {
  std::vector<std::string> out;
  if (auto summary = flush(now)) out.push_back(std::move(*summary));
  if (!window_start_) window_start_ = now;
  if (passed_ < burst_) {
    ++passed_;
    out.push_back(std::move(line));
  } else {
    ++held_;
    last_held_ = std::move(line);
  }
  return out;
}

std::optional<std::string> LogThrottle::flush(Clock::time_point now, bool force) {
  if (!window_start_ || (!force && now < *window_start_ + window_)) return std::nullopt;
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      force ? now - *window_start_ : window_);
  std::optional<std::string> summary;
  if (held_ > 0) {
    std::string_view last = last_held_;
    if (last.starts_with("rendezvous: ")) last.remove_prefix(std::string_view("rendezvous: ").size());
    summary = fmt::format("rendezvous: {} more {} in {}, not logged one by one; the last: {}", held_,
                          what_, describe_duration(elapsed), last);
  }
  window_start_.reset();
  passed_ = 0;
  held_ = 0;
  last_held_.clear();
  return summary;
}

}  // namespace conveyor::rendezvous
