#pragma once
// The time covered by a set of [start, end) spans: what a stage was busy for when its
// actions may overlap (a GPU stage's two chunks, or its weight gradients, on streams of
// their own run side by side), so that busy time never exceeds the wall time it spans.
#include <cstdint>
#include <utility>
#include <vector>

namespace conveyor::trace {

using Span = std::pair<std::int64_t, std::int64_t>;  // [start, end) in ns

/// Length of the union of `spans` (empty or reversed spans count nothing).
std::int64_t covered_ns(std::vector<Span> spans);

}  // namespace conveyor::trace
