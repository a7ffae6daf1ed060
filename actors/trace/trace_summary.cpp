#include "actors/trace/trace_summary.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

#include "actors/plan/schedule/simulator.hpp"
#include "actors/trace/action_times.hpp"
#include "actors/trace/interval_union.hpp"
#include "actors/trace/relayout_rounds.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::trace {
namespace {

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

// The train schedule simulated with the durations replica `replica`'s stage actors
// measured in `round` (each replica runs the same plans on its own micro-batches).
std::optional<sched::SimResult> replay(const TraceSet& set, const TracePlans* plans, const Round& round,
                                       int replica) {
  if (!plans) return std::nullopt;
  const ReplicaLayout layout = plans->layout();
  sched::SimCosts costs;
  for (int rank = 0; rank < layout.stages; ++rank) {
    const auto actor = static_cast<std::size_t>(layout.actor(replica, rank));
    if (actor >= round.actions.size()) continue;
    for (std::size_t i : round.actions[actor]) {
      const Record& r = set.records[i];
      costs.action_us[action_of(set, r).str(true)] = static_cast<double>(r.end_ns - r.start_ns) / 1e3;
    }
  }
  try {
    auto sim = sched::simulate(plans->train, costs);
    if (!sim.ok()) return std::nullopt;
    return sim;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::string change_text(const LayoutSwitch& sw) {
  return sw.joined ? fmt::format("after node {} joined", sw.node)
                   : fmt::format("after node {} was lost for good", sw.node);
}

}  // namespace

TraceSummary summarize(const TraceSet& set, int generation) {
  check_action_times(set);  // every difference below then fits, and no share is negative
  TraceSummary s;
  const TracePlans* plans = set.layout(generation);
  // Rows: the stage actors of the layout that ran these rounds (all the trace names when
  // its plans are unknown).
  s.stages = plans ? plans->layout().actors() : stage_count(set);
  if (plans) s.replicas = plans->replicas;
  s.generation = generation;
  if (generation > 0 && static_cast<std::size_t>(generation) <= set.switches.size()) {
    const auto& sw = set.switches[static_cast<std::size_t>(generation) - 1];
    s.from_step = sw.step;
    s.change = change_text(sw);
  }
  auto rounds = split_rounds(set, stage_count(set));
  const auto interrupted = interrupted_rounds(set, rounds);
  for (auto it = rounds.begin(); it != rounds.end();) {
    if (it->second.generation != generation) {
      it = rounds.erase(it);
      continue;
    }
    if (interrupted.count(it->first) && !it->second.eval)
      s.notes.push_back(fmt::format(
          "step {} (round {}) is left out: the shrink when node {} was lost interrupted it",
          it->second.step, it->first, interrupted.at(it->first)->node));
    if (interrupted.count(it->first)) {
      it = rounds.erase(it);
      continue;
    }
    it->second.actions.resize(static_cast<std::size_t>(s.stages));  // no actor beyond the layout's ran
    ++it;
  }
  // Stage actors of a node lost for good later: in a round where one ran short of its plan,
  // the rest of its records went with the node, so its row and the bubble leave that round
  // out rather than read the missing actions as idle time (relayout_rounds.hpp).
  const auto lost = actors_lost_later(set, generation);
  std::vector<double> stage_span_ms(static_cast<std::size_t>(s.stages), 0.0);
  s.per_stage.resize(static_cast<std::size_t>(s.stages));
  for (int r = 0; r < s.stages; ++r) s.per_stage[static_cast<std::size_t>(r)].stage = r;
  std::vector<double> sim_bubble_sum(static_cast<std::size_t>(s.stages), 0.0);
  double sim_span = 0, sim_bubble = 0;
  int simulated = 0;
  const Round* last = nullptr;
  double bubble_ms = 0;  // summed in ms: many rounds of many stages stay far from a limit
  for (const auto& [number, round] : rounds) {
    if (round.eval) continue;
    ++s.steps;
    last = &round;
    const std::int64_t span = round.last_end - round.first_start;
    s.span_ms += ms(span);
    bool records_lost = false;
    for (int st = 0; st < s.stages; ++st) {
      const auto& acts = round.actions[static_cast<std::size_t>(st)];
      if (lost.count(st) && acts.size() < plan_of(set, round, st).size()) {
        ++s.per_stage[static_cast<std::size_t>(st)].steps_lost;
        records_lost = true;
        continue;
      }
      stage_span_ms[static_cast<std::size_t>(st)] += ms(span);
      // Busy is the time covered by the stage's actions: on a GPU they may overlap
      // (streams of their own), and the sum beyond it is reported as overlap.
      std::int64_t summed = 0;
      std::vector<Span> spans;
      for (std::size_t i : acts) {
        summed += set.records[i].end_ns - set.records[i].start_ns;
        spans.emplace_back(set.records[i].start_ns, set.records[i].end_ns);
      }
      const std::int64_t busy = covered_ns(std::move(spans));
      const std::int64_t own = acts.empty() ? 0
                                            : set.records[acts.back()].end_ns -
                                                  set.records[acts.front()].start_ns;
      auto& ss = s.per_stage[static_cast<std::size_t>(st)];
      ss.busy_ms += ms(busy);
      ss.overlap_ms += ms(summed - busy);
      ss.idle_ms += ms(std::max<std::int64_t>(0, own - busy));
      ss.bubble_ms += ms(span - busy);
      bubble_ms += ms(span - busy);
    }
    // Every replica's pipeline simulated on its own durations: the step is the slowest
    // replica's (they meet at the gradient average), the bubble their mean.
    std::vector<sched::SimResult> sims;
    for (int rep = 0; rep < s.replicas && !records_lost; ++rep)
      if (auto sim = replay(set, plans, round, rep)) sims.push_back(std::move(*sim));
    if (static_cast<int>(sims.size()) == s.replicas) {
      ++simulated;
      const ReplicaLayout layout = plans->layout();
      double makespan = 0, bubble = 0;
      for (int rep = 0; rep < s.replicas; ++rep) {
        const auto& sim = sims[static_cast<std::size_t>(rep)];
        makespan = std::max(makespan, sim.makespan);
        bubble += sim.bubble / s.replicas;
        for (int rank = 0; rank < static_cast<int>(sim.stage_bubble.size()); ++rank) {
          const auto actor = static_cast<std::size_t>(layout.actor(rep, rank));
          if (actor < sim_bubble_sum.size()) sim_bubble_sum[actor] += sim.stage_bubble[static_cast<std::size_t>(rank)];
        }
      }
      sim_span += makespan / 1e3;
      sim_bubble += bubble;
    }
  }
  if (s.steps == 0)
    throw InputError(generation == 0 ? std::string("trace: no train step in the trace (nothing to summarise)")
                                     : fmt::format("trace: no train step of layout generation {} in the trace",
                                                   generation));
  s.step_ms = s.span_ms / s.steps;
  // Over the spans each stage was counted in: stages × span_ms when no record was lost.
  double counted_ms = 0;
  for (double v : stage_span_ms) counted_ms += v;
  s.bubble = counted_ms > 0 ? bubble_ms / counted_ms : 0;
  for (auto& ss : s.per_stage) {
    const double span_ms = stage_span_ms[static_cast<std::size_t>(ss.stage)];
    ss.busy_fraction = span_ms > 0 ? ss.busy_ms / span_ms : 0;
    ss.idle_fraction = span_ms > 0 ? ss.idle_ms / span_ms : 0;
    ss.bubble_fraction = span_ms > 0 ? ss.bubble_ms / span_ms : 0;
    if (ss.steps_lost > 0)
      s.notes.push_back(fmt::format(
          "stage {}: {} of the {} steps left out of its row, the bubble and the simulation: it ran on "
          "node {}, lost for good later, and its records of them went with it",
          ss.stage, ss.steps_lost, s.steps, lost.at(ss.stage)));
    if (simulated) ss.simulated_bubble_fraction = sim_bubble_sum[static_cast<std::size_t>(ss.stage)] / simulated;
  }
  if (simulated) {
    s.simulated_step_ms = sim_span / simulated;
    s.simulated_bubble = sim_bubble / simulated;
  }
  // Communication into each stage, over the train steps.
  for (const Record& r : set.records) {
    if (r.kind != RecordKind::pipe_receive || r.phase != 0 || r.stage < 0 || r.stage >= s.stages) continue;
    if (set.generation_of(r.round) != generation || interrupted.count(r.round)) continue;
    auto& ss = s.per_stage[static_cast<std::size_t>(r.stage)];
    ++ss.messages;
    ss.bytes += r.bytes;
    const auto send = set.cause_of(r);
    if (send >= 0) ss.comm_ms += ms(r.start_ns - set.records[static_cast<std::size_t>(send)].start_ns);
  }
  s.path_step = last->step;
  s.path = critical_path(set, *last);
  s.path_text = s.path.str(set);
  return s;
}

std::vector<TraceSummary> summarize_layouts(const TraceSet& set) {
  auto rounds = split_rounds(set, stage_count(set));
  const auto interrupted = interrupted_rounds(set, rounds);
  std::set<int> generations;
  for (const auto& [number, round] : rounds)
    if (!round.eval && !interrupted.count(number)) generations.insert(round.generation);
  if (generations.empty()) return {summarize(set, 0)};  // throws: no train step
  std::vector<TraceSummary> out;
  for (int g : generations) out.push_back(summarize(set, g));
  return out;
}

nlohmann::json summary_json(const TraceSummary& s) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& ss : s.per_stage) {
    json row = {{"stage", ss.stage},          {"busy_ms", ss.busy_ms},
                {"idle_ms", ss.idle_ms},      {"bubble_ms", ss.bubble_ms},
                {"overlap_ms", ss.overlap_ms},
                {"busy_fraction", ss.busy_fraction}, {"idle_fraction", ss.idle_fraction},
                {"bubble_fraction", ss.bubble_fraction}, {"comm_ms", ss.comm_ms},
                {"messages", ss.messages},    {"bytes", ss.bytes},
                {"steps_lost", ss.steps_lost}};
    row["simulated_bubble_fraction"] =
        ss.simulated_bubble_fraction ? json(*ss.simulated_bubble_fraction) : json(nullptr);
    stages.push_back(std::move(row));
  }
  json out = {{"steps", s.steps},
          {"stages", s.stages},
          {"replicas", s.replicas},
          {"step_ms", s.step_ms},
          {"bubble", s.bubble},
          {"simulated_step_ms", s.simulated_step_ms ? json(*s.simulated_step_ms) : json(nullptr)},
          {"simulated_bubble", s.simulated_bubble ? json(*s.simulated_bubble) : json(nullptr)},
          {"per_stage", std::move(stages)},
          {"critical_path",
           {{"step", s.path_step},
            {"actions", s.path_text},
            {"length", s.path.steps.size()},
            {"span_ms", ms(s.path.span_ns)},
            {"compute_ms", ms(s.path.compute_ns)},
            {"wait_ms", ms(s.path.wait_ns)}}}};
  if (s.generation > 0) {
    out["generation"] = s.generation;
    out["from_step"] = s.from_step;
    out["change"] = s.change;
  }
  if (!s.notes.empty()) out["notes"] = s.notes;
  return out;
}

nlohmann::json summary_json(const std::vector<TraceSummary>& layouts) {
  if (layouts.size() == 1) return summary_json(layouts.front());
  nlohmann::json all = nlohmann::json::array();
  for (const auto& s : layouts) {
    auto j = summary_json(s);
    j["generation"] = s.generation;  // also 0, so that every entry says which it is
    all.push_back(std::move(j));
  }
  return {{"layouts", std::move(all)}};
}

std::string summary_text(const TraceSummary& s) {
  auto pct = [](double f) { return fmt::format("{:5.1f}%", 100 * f); };
  std::string out = fmt::format(
      "{} train steps traced, {}; step {:.3f} ms measured{}; bubble {} measured{}\n",
      s.steps,
      s.replicas > 1 ? fmt::format("{} stage actors ({} replicas × {} stages, actor = replica × "
                                   "{} + rank)",
                                   s.stages, s.replicas, s.stages / s.replicas, s.stages / s.replicas)
                     : fmt::format("{} stages", s.stages),
      s.step_ms,
      s.simulated_step_ms ? fmt::format(", {:.3f} ms simulated", *s.simulated_step_ms) : "",
      pct(s.bubble),
      s.simulated_bubble ? fmt::format(", {} simulated with the same durations", pct(*s.simulated_bubble)) : "");
  out += "stage   busy    idle  bubble  (simulated)  comm ms  messages  bytes\n";
  for (const auto& ss : s.per_stage)
    out += fmt::format("{:>5} {} {} {}  ({:>9})  {:>7.3f}  {:>8}  {}\n", ss.stage,
                       pct(ss.busy_fraction), pct(ss.idle_fraction), pct(ss.bubble_fraction),
                       ss.simulated_bubble_fraction ? pct(*ss.simulated_bubble_fraction) : "-",
                       ss.comm_ms, ss.messages, ss.bytes);
  for (const auto& ss : s.per_stage)
    if (ss.overlap_ms > 0)
      out += fmt::format(
          "stage {}: actions overlapped for {:.3f} ms on the device (streams of their own; busy "
          "counts that time once, the simulator runs the stage's actions one at a time)\n",
          ss.stage, ss.overlap_ms);
  out += fmt::format(
      "critical path of step {} ({} actions, {:.3f} ms: {:.3f} ms compute, {:.3f} ms waiting):\n  {}\n",
      s.path_step, s.path.steps.size(), ms(s.path.span_ns), ms(s.path.compute_ns), ms(s.path.wait_ns),
      s.path_text);
  for (const auto& note : s.notes) out += note + "\n";
  return out;
}

std::string summary_text(const std::vector<TraceSummary>& layouts) {
  if (layouts.size() == 1 && layouts.front().generation == 0) return summary_text(layouts.front());
  std::string out;
  for (const auto& s : layouts) {
    if (!out.empty()) out += "\n";
    out += fmt::format("layout generation {}: {} stage actors, {}\n", s.generation, s.stages,
                       s.generation == 0 ? std::string("the layout the run started with")
                                         : fmt::format("from step {}, {}", s.from_step, s.change));
    out += summary_text(s);
  }
  return out;
}

}  // namespace conveyor::trace
