#pragma once
// Which steps a run traces: `trace.steps` is "all", one step "12", or an inclusive range
// "10-20". Pure.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::trace {

struct StepRange {
  std::int64_t first = 0;
  std::int64_t last = std::numeric_limits<std::int64_t>::max();

  bool contains(std::int64_t step) const { return step >= first && step <= last; }
  bool all() const { return first == 0 && last == std::numeric_limits<std::int64_t>::max(); }
  /// "all", "12" or "10-20": parse() reads it back.
  std::string str() const;
  /// Parses "all", "N" or "A-B" (0 <= A <= B); nullopt on anything else.
  static std::optional<StepRange> parse(std::string_view text);
};

}  // namespace conveyor::trace
