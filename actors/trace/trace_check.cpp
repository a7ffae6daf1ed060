#include "actors/trace/trace_check.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>
#include <tuple>

#include "actors/plan/schedule/action.hpp"
#include "actors/trace/relayout_rounds.hpp"
#include "actors/trace/trace_rounds.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::trace {
namespace {

std::string round_name(const Round& r) {
  return fmt::format("{}step {} (round {})", r.eval ? "eval " : "", r.step, r.round);
}

std::string message_name(const Record& r) {
  const char* kind = r.action == static_cast<std::uint8_t>(sched::ActionKind::F) ? "activation" : "gradient";
  if (r.kind == RecordKind::pipe_send || r.kind == RecordKind::pipe_receive)
    return fmt::format("{} {}step {} micro-batch {}", kind, r.phase ? "eval " : "", r.step, r.micro_batch);
  return fmt::format("{} of {}step {}", record_kind_name(r.kind), r.phase ? "eval " : "", r.step);
}

std::string who(int stage) {
  return stage == kCoordinator ? "the coordinator" : fmt::format("stage {}", stage);
}

std::string switch_text(const LayoutSwitch& s) {
  return s.joined ? fmt::format("node {} joined", s.node)
                  : fmt::format("node {} was lost for good", s.node);
}

// What a change of layout explains, counted so that it is said once instead of listed.
struct Explained {
  // Interrupted round → actions that ran, actions planned, messages in flight dropped.
  using Counts = std::tuple<std::size_t, std::size_t, std::size_t>;
  std::map<std::uint32_t, Counts> interrupted;
  // Lost node → its stage actors, their actions and message ends not in the trace.
  struct Lost {
    std::set<int> actors;
    std::size_t actions = 0, message_ends = 0;
  };
  std::map<int, Lost> lost;
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> unplanned;  // generation → rounds
};

// The actor ran the start of its plan and then nothing: records its file never got.
bool runs_short(const std::vector<sched::Action>& plan, const TraceSet& set,
                const std::vector<std::size_t>& ran) {
  if (ran.size() >= plan.size()) return false;
  for (std::size_t k = 0; k < ran.size(); ++k)
    if (!(action_of(set, set.records[ran[k]]) == plan[k])) return false;
  return true;
}

void check_order(const TraceSet& set, const std::map<std::uint32_t, Round>& rounds,
                 const std::map<std::uint32_t, const LayoutSwitch*>& interrupted, CheckResult& out,
                 Explained& explained) {
  for (const auto& [number, round] : rounds) {
    const TracePlans* plans = set.layout(round.generation);
    if (!plans) {  // a layout schedule.json does not hold (written before layouts were saved)
      auto& span = explained.unplanned.try_emplace(round.generation, number, number).first->second;
      span.second = number;
      continue;
    }
    ++out.rounds_checked;
    const int stages = plans->layout().actors();
    if (interrupted.count(number)) {
      auto& [ran, planned, dropped] = explained.interrupted[number];
      for (int st = 0; st < stages; ++st) {
        ran += round.actions[static_cast<std::size_t>(st)].size();
        planned += plan_of(set, round, st).size();
      }
      continue;  // its stages stopped where the shrink found them
    }
    const auto lost = actors_lost_later(set, round.generation);
    const bool chunks = plans->train.chunks_per_rank() > 1;
    // Records of an actor beyond the layout's (none run) are findings of their own: the
    // round's layout has no plan for them.
    for (int st = 0; st < static_cast<int>(round.actions.size()); ++st) {
      const auto plan = plan_of(set, round, st);
      const auto& ran = round.actions[static_cast<std::size_t>(st)];
      if (lost.count(st) && runs_short(plan, set, ran)) {
        auto& l = explained.lost[lost.at(st)];
        l.actors.insert(st);
        l.actions += plan.size() - ran.size();
        continue;
      }
      for (std::size_t k = 0; k < std::max(plan.size(), ran.size()); ++k) {
        if (k >= ran.size()) {
          out.findings.push_back({"order", fmt::format("stage {} {}: ran {} of its {} actions; "
                                                       "{} (position {}) never ran",
                                                       st, round_name(round), ran.size(),
                                                       plan.size(), plan[k].str(chunks), k)});
          break;
        }
        const sched::Action did = action_of(set, set.records[ran[k]]);
        if (k >= plan.size()) {
          out.findings.push_back({"order", fmt::format("stage {} {}: ran {} at position {}, "
                                                       "past the end of its {}-action plan",
                                                       st, round_name(round), did.str(chunks), k,
                                                       plan.size())});
          break;
        }
        if (!(did == plan[k])) {
          out.findings.push_back({"order", fmt::format("stage {} {}: ran {} at position {} where "
                                                       "the schedule has {}",
                                                       st, round_name(round), did.str(chunks), k,
                                                       plan[k].str(chunks))});
          break;  // later positions follow from the first divergence
        }
      }
    }
  }
}

// The stage actor that wrote the record with id `id` (kCoordinator for the coordinator).
int writer_actor(std::uint64_t id) { return static_cast<int>(id >> kWriterShift) - 1; }

void check_messages(const TraceSet& set, const std::map<std::uint32_t, const LayoutSwitch*>& interrupted,
                    CheckResult& out, Explained& explained) {
  std::map<int, std::map<int, int>> lost_of;  // generation → actor → node (memoised)
  auto lost_node = [&](const Record& r, int actor) -> int {
    const int g = set.generation_of(r.round);
    if (!lost_of.count(g)) lost_of[g] = actors_lost_later(set, g);
    const auto& lost = lost_of[g];
    const auto it = lost.find(actor);
    return it == lost.end() ? -1 : it->second;
  };
  auto explain_lost = [&](int node, int actor) {
    auto& l = explained.lost[node];
    l.actors.insert(actor);
    ++l.message_ends;
  };
  std::map<std::uint64_t, std::size_t> receives_of;  // send id → receives citing it
  for (const Record& r : set.records) {
    if (!is_receive(r.kind)) continue;
    ++out.messages_checked;
    const auto s = set.cause_of(r);
    if (s < 0 || !is_send(set.records[static_cast<std::size_t>(s)].kind)) {
      if (interrupted.count(r.round)) continue;  // its send went with the lost node's file
      const int sender = r.cause ? writer_actor(r.cause) : kCoordinator;
      if (s < 0 && r.cause && sender != kCoordinator && lost_node(r, sender) >= 0) {
        explain_lost(lost_node(r, sender), sender);
        continue;
      }
      out.findings.push_back({"unmatched_receive",
                              fmt::format("{} received {} from {} with no matching send in the "
                                          "trace (cause {:#x})",
                                          who(r.stage), message_name(r), who(r.peer), r.cause)});
      continue;
    }
    ++receives_of[r.cause];
  }
  for (const Record& r : set.records) {
    if (!is_send(r.kind)) continue;
    const auto n = receives_of.count(r.id) ? receives_of[r.id] : 0;
    if (n == 0 && interrupted.count(r.round)) {
      ++std::get<2>(explained.interrupted[r.round]);
      continue;
    }
    if (n == 0 && r.peer != kCoordinator && lost_node(r, r.peer) >= 0) {
      explain_lost(lost_node(r, r.peer), r.peer);
      continue;
    }
    if (n == 0)
      out.findings.push_back({"unmatched_send", fmt::format("{} sent {} to {}; it was never "
                                                            "received",
                                                            who(r.stage), message_name(r), who(r.peer))});
    else if (n > 1)
      out.findings.push_back({"unmatched_receive",
                              fmt::format("{} sent {} to {} once; it was received {} times",
                                          who(r.stage), message_name(r), who(r.peer), n)});
  }
  // FIFO per link: sort each link's receives by send time; receive times must then rise.
  using Link = std::tuple<int, int, int>;  // sender, receiver, record kind
  std::map<Link, std::vector<std::pair<const Record*, const Record*>>> links;
  for (const Record& r : set.records) {
    if (!is_receive(r.kind)) continue;
    const auto s = set.cause_of(r);
    if (s < 0) continue;
    const Record& send = set.records[static_cast<std::size_t>(s)];
    links[{send.stage, r.stage, static_cast<int>(send.kind)}].emplace_back(&send, &r);
  }
  for (auto& [link, pairs] : links) {
    std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
      return a.first->start_ns < b.first->start_ns;
    });
    for (std::size_t i = 1; i < pairs.size(); ++i) {
      if (pairs[i].second->start_ns >= pairs[i - 1].second->start_ns) continue;
      out.findings.push_back(
          {"out_of_order",
           fmt::format("{} received {} from {} before {}, which was sent earlier",
                       who(std::get<1>(link)), message_name(*pairs[i].second), who(std::get<0>(link)),
                       message_name(*pairs[i - 1].second))});
    }
  }
}

// One line per layout the trace ran, then what the changes between them explain.
void add_notes(const TraceSet& set, const std::map<std::uint32_t, Round>& rounds,
               const std::map<std::uint32_t, const LayoutSwitch*>& interrupted, const Explained& e,
               CheckResult& out) {
  if (set.switches.empty()) return;
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> span;  // generation → first, last round
  for (const auto& [number, round] : rounds) {
    auto& s = span.try_emplace(round.generation, number, number).first->second;
    s.second = number;
  }
  for (const auto& [g, s] : span) {
    const TracePlans* plans = set.layout(g);
    const std::string size =
        plans ? fmt::format("{} stage actors", plans->layout().actors()) : "plans unknown";
    const std::string how =
        g == 0 ? "the layout the run started with"
               : fmt::format("from step {}, after {}", set.switches[static_cast<std::size_t>(g) - 1].step,
                             switch_text(set.switches[static_cast<std::size_t>(g) - 1]));
    out.notes.push_back(
        fmt::format("layout generation {} ({}; {}): rounds {}-{}", g, size, how, s.first, s.second));
  }
  for (const auto& [number, sw] : interrupted) {
    const auto counts = e.interrupted.find(number);
    const auto [ran, planned, dropped] =
        counts == e.interrupted.end() ? Explained::Counts{} : counts->second;
    out.notes.push_back(fmt::format(
        "{} was interrupted by the shrink when {}: {} of its {} actions ran, {} message(s) in flight were "
        "dropped with the old stage actors; not findings",
        round_name(rounds.at(number)), switch_text(*sw), ran, planned, dropped));
  }
  for (const auto& [node, l] : e.lost)
    out.notes.push_back(fmt::format(
        "node {} was lost for good: {} action(s) and {} message end(s) of its stage actor(s) [{}] in the "
        "layouts before are not in the trace (its file ends where it last wrote); not findings",
        node, l.actions, l.message_ends, fmt::join(l.actors, ", ")));
  for (const auto& [g, s] : e.unplanned)
    out.notes.push_back(fmt::format(
        "rounds {}-{} ran layout generation {}, whose plans schedule.json does not hold (written before "
        "layouts were saved): their order is not checked",
        s.first, s.second, g));
}

}  // namespace

CheckResult check_trace(const TraceSet& set) {
  // A run that traced anything wrote records: "0 findings" of nothing would read as a pass.
  if (set.records.empty()) throw InputError("trace: the trace files hold no records (nothing to check)");
  CheckResult out;
  const auto rounds = split_rounds(set, stage_count(set));
  const auto interrupted = interrupted_rounds(set, rounds);
  Explained explained;
  if (set.plans) {
    out.order_checked = true;
    check_order(set, rounds, interrupted, out, explained);
  }
  check_messages(set, interrupted, out, explained);
  add_notes(set, rounds, interrupted, explained, out);
  return out;
}

}  // namespace conveyor::trace
