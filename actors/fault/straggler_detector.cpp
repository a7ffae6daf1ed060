#include "actors/fault/straggler_detector.hpp"

#include <algorithm>
#include <stdexcept>

namespace conveyor {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

StragglerDetector::StragglerDetector(double factor, int steps) : factor_(factor), steps_(steps) {
  if (!(factor > 1)) throw std::invalid_argument("StragglerDetector: factor must be > 1");
  if (steps < 1) throw std::invalid_argument("StragglerDetector: steps must be >= 1");
}

std::vector<StragglerReport> StragglerDetector::observe(const StepMetrics& m) {
  std::vector<StragglerReport> reports;
  const auto& busy = m.stage_busy_ms;
  if (busy.size() < 2) return reports;
  if (streak_.size() != busy.size()) {  // first step, or the rank count changed: start over
    streak_.assign(busy.size(), 0);
    reported_.assign(busy.size(), false);
  }
  for (std::size_t r = 0; r < busy.size(); ++r) {
    std::vector<double> peers = busy;
    peers.erase(peers.begin() + static_cast<std::ptrdiff_t>(r));
    const double med = median(std::move(peers));
    if (!(med > 0) || !(busy[r] > factor_ * med)) {  // recovered: the episode (if any) is over
      streak_[r] = 0;
      reported_[r] = false;
      continue;
    }
    ++streak_[r];
    if (streak_[r] >= steps_ && !reported_[r]) {
      reported_[r] = true;
      reports.push_back(StragglerReport{static_cast<int>(r), m.step, busy[r], med, busy[r] / med,
                                        streak_[r]});
    }
  }
  return reports;
}

}  // namespace conveyor
