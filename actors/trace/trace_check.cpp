#include "actors/trace/trace_check.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "actors/plan/schedule/action.hpp"
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

void check_order(const TraceSet& set, CheckResult& out) {
  const int stages = stage_count(set);
  for (const auto& [number, round] : split_rounds(set, stages)) {
    ++out.rounds_checked;
    // An eval round ran one wave: the one that holds its lowest micro-batch.
    int lowest = std::numeric_limits<int>::max();
    for (const auto& ran : round.actions)
      for (const auto i : ran) lowest = std::min(lowest, set.records[i].micro_batch);
    for (int st = 0; st < stages; ++st) {
      const auto plan = set.plans->plan(st, round.eval, lowest);
      const auto& ran = round.actions[static_cast<std::size_t>(st)];
      const bool chunks = set.plans->train.chunks_per_rank() > 1;
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

void check_messages(const TraceSet& set, CheckResult& out) {
  std::map<std::uint64_t, std::size_t> receives_of;  // send id → receives citing it
  for (const Record& r : set.records) {
    if (!is_receive(r.kind)) continue;
    ++out.messages_checked;
    const auto s = r.cause ? set.find(r.cause) : -1;
    if (s < 0 || !is_send(set.records[static_cast<std::size_t>(s)].kind)) {
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
    const auto s = set.find(r.cause);
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

}  // namespace

CheckResult check_trace(const TraceSet& set) {
  // A run that traced anything wrote records: "0 findings" of nothing would read as a pass.
  if (set.records.empty()) throw InputError("trace: the trace files hold no records (nothing to check)");
  CheckResult out;
  if (set.plans) {
    out.order_checked = true;
    check_order(set, out);
  }
  check_messages(set, out);
  return out;
}

}  // namespace conveyor::trace
