#include "actors/trace/trace_rounds.hpp"

#include <algorithm>

namespace conveyor::trace {

std::size_t Round::action_count() const {
  std::size_t n = 0;
  for (const auto& s : actions) n += s.size();
  return n;
}

int stage_count(const TraceSet& set) {
  if (set.plans) return set.plans->layout().actors();
  int n = 0;
  for (const auto& r : set.records) n = std::max(n, r.stage + 1);
  return n;
}

int pipeline_rank(const TraceSet& set, int actor) {
  if (!set.plans || set.plans->layout().actors() == 0) return actor;
  return set.plans->layout().stage_of(actor);
}

sched::Action action_of(const TraceSet& set, const Record& r, bool as_actor) {
  return sched::Action{as_actor ? r.stage : pipeline_rank(set, r.stage),
                       static_cast<sched::ActionKind>(r.action), r.micro_batch, r.chunk};
}

std::map<std::uint32_t, Round> split_rounds(const TraceSet& set, int stages) {
  std::map<std::uint32_t, Round> rounds;
  for (std::size_t i = 0; i < set.records.size(); ++i) {
    const Record& r = set.records[i];
    if (r.kind != RecordKind::action || r.stage < 0 || r.stage >= stages) continue;
    Round& round = rounds[r.round];
    if (round.actions.empty()) {
      round.round = r.round;
      round.step = r.step;
      round.eval = r.phase != 0;
      round.actions.resize(static_cast<std::size_t>(stages));
      round.first_start = r.start_ns;
      round.last_end = r.end_ns;
    }
    round.actions[static_cast<std::size_t>(r.stage)].push_back(i);  // records are by start
    round.first_start = std::min(round.first_start, r.start_ns);
    round.last_end = std::max(round.last_end, r.end_ns);
  }
  return rounds;
}

}  // namespace conveyor::trace
