#include "actors/trace/interval_union.hpp"

#include <algorithm>

namespace conveyor::trace {

std::int64_t covered_ns(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::int64_t covered = 0, reach = INT64_MIN;
  for (const auto& [start, end] : spans) {
    if (end <= start) continue;
    const std::int64_t from = std::max(start, reach);
    if (end > from) covered += end - from;
    reach = std::max(reach, end);
  }
  return covered;
}

}  // namespace conveyor::trace
