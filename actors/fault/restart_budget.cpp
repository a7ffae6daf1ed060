#include "actors/fault/restart_budget.hpp"

#include <stdexcept>

namespace conveyor {

RestartBudget::RestartBudget(int max_restarts, double window_s)
    : max_restarts_(max_restarts), window_s_(window_s) {
  if (max_restarts < 0) throw std::invalid_argument("RestartBudget: max_restarts < 0");
  if (!(window_s > 0)) throw std::invalid_argument("RestartBudget: window_s must be > 0");
}

void RestartBudget::expire(Clock::time_point now) {
  const auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window_s_));
  while (!recent_.empty() && now - recent_.front() >= window) recent_.pop_front();
}

bool RestartBudget::admit(Clock::time_point now) {
  expire(now);
  if (static_cast<int>(recent_.size()) >= max_restarts_) return false;
  recent_.push_back(now);
  return true;
}

int RestartBudget::used(Clock::time_point now) {
  expire(now);
  return static_cast<int>(recent_.size());
}

}  // namespace conveyor
