#include "actors/trace/trace_rounds.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::trace {

std::size_t Round::action_count() const {
  std::size_t n = 0;
  for (const auto& s : actions) n += s.size();
  return n;
}

int stage_count(const TraceSet& set) {
  if (set.plans) return set.most_actors();
  int n = 0;
  for (const auto& r : set.records) n = std::max(n, r.stage + 1);
  return n;
}

int stage_count(const TraceSet& set, const Round& round) {
  const TracePlans* plans = set.layout(round.generation);
  return plans ? plans->layout().actors() : stage_count(set);
}

int pipeline_rank(const TraceSet& set, int actor, std::uint32_t round) {
  const TracePlans* plans = set.plans_of(round);
  if (!plans || plans->layout().actors() == 0) return actor;
  return plans->layout().stage_of(actor);
}

std::vector<sched::Action> plan_of(const TraceSet& set, const Round& round, int actor) {
  const TracePlans* plans = set.layout(round.generation);
  if (!plans) return {};
  // An eval round ran one wave: the one that holds its lowest micro-batch.
  int lowest = std::numeric_limits<int>::max();
  for (const auto& ran : round.actions)
    for (const auto i : ran) lowest = std::min(lowest, set.records[i].micro_batch);
  return plans->plan(actor, round.eval, lowest);
}

sched::Action action_of(const TraceSet& set, const Record& r, bool as_actor) {
  return sched::Action{as_actor ? r.stage : pipeline_rank(set, r.stage, r.round),
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
      round.generation = set.generation_of(r.round);
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
