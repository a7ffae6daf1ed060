#include "actors/trace/step_range.hpp"

#include <charconv>

namespace conveyor::trace {
namespace {

std::optional<std::int64_t> number(std::string_view s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::string StepRange::str() const {
  if (all()) return "all";
  if (first == last) return std::to_string(first);
  return std::to_string(first) + "-" + std::to_string(last);
}

std::optional<StepRange> StepRange::parse(std::string_view text) {
  if (text == "all") return StepRange{};
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    auto v = number(text);
    if (!v) return std::nullopt;
    return StepRange{*v, *v};
  }
  auto a = number(text.substr(0, dash)), b = number(text.substr(dash + 1));
  if (!a || !b || *a > *b) return std::nullopt;
  return StepRange{*a, *b};
}

}  // namespace conveyor::trace
