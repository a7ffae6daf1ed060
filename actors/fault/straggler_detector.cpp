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
    early_.assign(busy.size(), {});
    baseline_.clear();
    streak_.assign(busy.size(), 0);
    reported_.assign(busy.size(), false);
  }
  std::vector<double> peer_median(busy.size());
  for (std::size_t r = 0; r < busy.size(); ++r) {
    std::vector<double> peers = busy;
    peers.erase(peers.begin() + static_cast<std::ptrdiff_t>(r));
    peer_median[r] = median(std::move(peers));
    if (!(peer_median[r] > 0)) return reports;  // an idle step says nothing
  }
  if (baseline_.empty()) {
    for (std::size_t r = 0; r < busy.size(); ++r) early_[r].push_back(busy[r] / peer_median[r]);
    if (static_cast<int>(early_.front().size()) < kBaselineSteps) return reports;
    for (auto& ratios : early_) baseline_.push_back(median(ratios));
    return reports;
  }
  for (std::size_t r = 0; r < busy.size(); ++r) {
    const double ratio = busy[r] / peer_median[r];
    if (!(ratio > factor_ * baseline_[r])) {  // recovered: the episode (if any) is over
      streak_[r] = 0;
      reported_[r] = false;
      continue;
    }
    ++streak_[r];
    if (streak_[r] >= steps_ && !reported_[r]) {
      reported_[r] = true;
      reports.push_back(StragglerReport{static_cast<int>(r), m.step, busy[r], peer_median[r], ratio,
                                        baseline_[r], streak_[r]});
    }
  }
  return reports;
}

}  // namespace conveyor
