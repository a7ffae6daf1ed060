#include "actors/trace/action_times.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <utility>

#include "actors/trace/trace_rounds.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::trace {
namespace {

// b - a for b >= a, exact even where the signed difference would overflow.
std::uint64_t distance(std::int64_t a, std::int64_t b) {
  return static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
}

std::string name(const TraceSet& set, const Record& r) {
  return fmt::format("stage {}'s action {} of {} step {} (round {}, record id {:#x})", r.stage,
                     action_of(set, r, /*as_actor=*/true).str(), r.phase == 0 ? "train" : "eval", r.step, r.round,
                     r.id);
}

[[noreturn]] void refuse(const std::string& what) {
  throw InputError("trace: " + what +
                   "; no run writes that (a corrupt trace file, or a wrong clock offset): the trace cannot be "
                   "summarised");
}

[[noreturn]] void refuse(const TraceSet& set, const Record& r, const std::string& why) {
  refuse(name(set, r) + " " + why);
}

}  // namespace

void check_action_times(const TraceSet& set) {
  std::map<std::uint32_t, std::int64_t> first_start;  // of each round's records
  for (const Record& r : set.records) {
    if (r.round == 0) continue;  // a stage's records before its first plan
    auto [it, fresh] = first_start.emplace(r.round, r.start_ns);
    if (!fresh) it->second = std::min(it->second, r.start_ns);
  }
  // Round -> the later round that began first, and when.
  std::map<std::uint32_t, std::pair<std::uint32_t, std::int64_t>> next_begin;
  std::optional<std::pair<std::uint32_t, std::int64_t>> earliest_later;
  for (auto it = first_start.rbegin(); it != first_start.rend(); ++it) {
    if (earliest_later) next_begin[it->first] = *earliest_later;
    if (!earliest_later || it->second < earliest_later->second) earliest_later = {it->first, it->second};
  }
  // Round -> its earliest-starting and its latest-ending action.
  std::map<std::uint32_t, std::pair<const Record*, const Record*>> round_span;
  for (const Record& r : set.records) {
    if (r.kind != RecordKind::action) continue;
    if (r.end_ns < r.start_ns)
      refuse(set, r, fmt::format("ends before it starts (start {} ns, end {} ns)", r.start_ns, r.end_ns));
    if (const auto d = distance(r.start_ns, r.end_ns); d > static_cast<std::uint64_t>(kMaxActionNs))
      refuse(set, r, fmt::format("lasts {:.3g} s (start {} ns, end {} ns), more than a week",
                                 static_cast<double>(d) / 1e9, r.start_ns, r.end_ns));
    auto [span, fresh] = round_span.emplace(r.round, std::pair{&r, &r});
    if (!fresh && r.start_ns < span->second.first->start_ns) span->second.first = &r;
    if (!fresh && r.end_ns > span->second.second->end_ns) span->second.second = &r;
    const auto next = next_begin.find(r.round);
    if (next == next_begin.end()) continue;
    const auto [round, begin] = next->second;
    if (r.end_ns > begin && distance(begin, r.end_ns) > static_cast<std::uint64_t>(kRoundOverlapSlackNs))
      refuse(set, r, fmt::format("ends {:.3f} s after round {} began (at {} ns; the action ends at {} ns), but a "
                                 "round starts only once every stage reported the one before",
                                 static_cast<double>(distance(begin, r.end_ns)) / 1e9, round, begin, r.end_ns));
  }
  // Each action fits a week, two of one round may still lie years apart.
  for (const auto& [round, ends] : round_span) {
    const auto& [first, last] = ends;
    if (const auto d = distance(first->start_ns, last->end_ns); d > static_cast<std::uint64_t>(kMaxActionNs))
      refuse(fmt::format("round {} spans {:.3g} s, more than a week, from {} (start {} ns) to {} (end {} ns)", round,
                         static_cast<double>(d) / 1e9, name(set, *first), first->start_ns, name(set, *last),
                         last->end_ns));
  }
}

}  // namespace conveyor::trace
