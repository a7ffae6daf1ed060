#include "actors/trace/critical_path.hpp"

#include <algorithm>

#include "actors/plan/schedule/action.hpp"
#include "actors/trace/interval_union.hpp"

namespace conveyor::trace {
namespace {

// The action that produced the message `action` consumed, or -1.
std::int64_t producer_of(const TraceSet& set, const Record& action, std::int64_t* arrival) {
  const auto rec = set.cause_of(action);
  if (rec < 0 || set.records[static_cast<std::size_t>(rec)].kind != RecordKind::pipe_receive) return -1;
  const Record& receive = set.records[static_cast<std::size_t>(rec)];
  const auto send = set.cause_of(receive);
  if (send < 0) return -1;
  const auto producer = set.cause_of(set.records[static_cast<std::size_t>(send)]);
  if (producer < 0 || set.records[static_cast<std::size_t>(producer)].kind != RecordKind::action) return -1;
  *arrival = receive.start_ns;
  return producer;
}

}  // namespace

std::string CriticalPath::str(const TraceSet& set) const {
  std::string out;
  for (const auto& s : steps) {
    if (!out.empty()) out += " → ";
    out += action_of(set, set.records[s.record], /*as_actor=*/true).str();
  }
  return out;
}

CriticalPath critical_path(const TraceSet& set, const Round& round) {
  CriticalPath path;
  // Position of every action of the round on its stage.
  std::unordered_map<std::size_t, std::size_t> position;
  std::int64_t last = -1;
  for (const auto& stage : round.actions)
    for (std::size_t k = 0; k < stage.size(); ++k) {
      position[stage[k]] = k;
      if (last < 0 || set.records[stage[k]].end_ns > set.records[static_cast<std::size_t>(last)].end_ns)
        last = static_cast<std::int64_t>(stage[k]);
    }
  if (last < 0) return path;
  std::vector<PathStep> reversed;
  std::size_t at = static_cast<std::size_t>(last);
  for (std::size_t guard = 0; guard <= set.records.size(); ++guard) {
    const Record& a = set.records[at];
    PathStep step{at, false, 0};
    const auto& mine = round.actions[static_cast<std::size_t>(a.stage)];
    const std::size_t k = position[at];
    std::int64_t arrival = 0;
    const std::int64_t producer = producer_of(set, a, &arrival);
    const bool has_prev = k > 0;
    const std::int64_t prev_end = has_prev ? set.records[mine[k - 1]].end_ns : 0;
    const bool producer_in_round = producer >= 0 && position.count(static_cast<std::size_t>(producer));
    if (producer_in_round && (!has_prev || arrival >= prev_end)) {
      step.via_message = true;
      // < 0 on a GPU: device times, and the consumer was queued (behind an event) before
      // the producer's kernels ended.
      step.wait_ns = std::max<std::int64_t>(
          0, a.start_ns - set.records[static_cast<std::size_t>(producer)].end_ns);
      reversed.push_back(step);
      at = static_cast<std::size_t>(producer);
    } else if (has_prev) {
      step.wait_ns = std::max<std::int64_t>(0, a.start_ns - prev_end);  // < 0: they overlapped
      reversed.push_back(step);
      at = mine[k - 1];
    } else {
      reversed.push_back(step);
      break;
    }
  }
  path.steps.assign(reversed.rbegin(), reversed.rend());
  const Record& first = set.records[path.steps.front().record];
  const Record& end = set.records[path.steps.back().record];
  path.span_ns = end.end_ns - first.start_ns;
  // Compute is the time the path's actions cover: on a GPU consecutive actions of a stage
  // may overlap (streams of their own), and summed durations would exceed the span.
  std::vector<Span> spans;
  for (const auto& s : path.steps)
    spans.emplace_back(set.records[s.record].start_ns, set.records[s.record].end_ns);
  path.compute_ns = covered_ns(std::move(spans));
  path.wait_ns = path.span_ns - path.compute_ns;
  return path;
}

}  // namespace conveyor::trace
