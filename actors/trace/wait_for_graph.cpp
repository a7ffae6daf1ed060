#include "actors/trace/wait_for_graph.hpp"

#include <fmt/format.h>

#include <optional>

#include "actors/plan/eval_plan.hpp"

namespace conveyor::trace {
namespace {

struct Need {
  bool exists = false;        // the action waits for a message
  bool gradient = false;
  int micro_batch = 0;
  int from_rank = 0;
  int from_chunk = 0;
  bool sent = false;
};

// The plan `s` runs: its train plan, or its part of the evaluation's wave.
std::optional<std::vector<sched::Action>> plan_of(const WaitForContext& c, const StageSnapshot& s) {
  const auto& plans = s.eval ? c.eval_plans : c.train_plans;
  if (s.rank < 0 || s.rank >= static_cast<int>(plans.size())) return std::nullopt;
  const auto& plan = plans[static_cast<std::size_t>(s.rank)];
  if (!s.eval) return plan;
  return eval_wave_of(plan, c.eval_wave, static_cast<int>(s.first_micro_batch));
}

// Has `sender` produced the output of (kind, chunk, micro-batch) of `round`?
bool produced(const WaitForContext& c, const StageSnapshot& sender, std::int64_t round,
              bool gradient, int chunk, int micro_batch) {
  if (sender.round > round) return true;
  if (sender.round < round) return false;
  if (sender.state == StageState::idle) return true;  // finished this round's list
  const auto plan = plan_of(c, sender);
  if (!plan) return false;
  for (std::size_t k = 0; k < plan->size(); ++k) {
    const auto& a = (*plan)[k];
    const bool match = a.chunk == chunk && a.micro_batch == micro_batch &&
                       (gradient ? sched::is_input_backward(a.kind) : a.kind == sched::ActionKind::F);
    if (match) return static_cast<std::int64_t>(k) < sender.slot;
  }
  return false;
}

std::string phase_step(const StageSnapshot& s) {
  return fmt::format("{}step {}", s.eval ? "eval " : "", s.step);
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

WaitForGraph build_wait_for_graph(const std::vector<StageSnapshot>& stages,
                                  const WaitForContext& c, std::int64_t now_ns) {
  WaitForGraph g;
  const int n = static_cast<int>(stages.size());
  g.waits_for.assign(static_cast<std::size_t>(n), -1);
  std::vector<Need> needs(static_cast<std::size_t>(n));
  std::string lost, stalled, idle;
  int lost_rank = -1, stalled_rank = -1, idle_rank = -1;
  std::int64_t stalled_for = -1;
  for (const auto& s : stages) {
    const double for_s = seconds(now_ns - s.since_ns);
    if (s.state == StageState::idle) {
      g.lines.push_back(s.round == 0
                            ? fmt::format("stage {} has no plan yet (waits for the coordinator)", s.rank)
                            : fmt::format("stage {} finished {} and waits for the coordinator's next "
                                          "plan ({:.1f} s)",
                                          s.rank, phase_step(s), for_s));
      if (idle_rank < 0) idle_rank = s.rank, idle = g.lines.back();
      continue;
    }
    const auto plan = plan_of(c, s);
    // Past its last action, a train step's stage finishes the step before it reports: with
    // data-parallel replicas that is the gradient all-reduce with them, which waits for
    // every replica of its stage.
    if (plan && !s.eval && s.state == StageState::waiting &&
        s.slot == static_cast<std::int64_t>(plan->size())) {
      const bool replicas = n > static_cast<int>(c.placement.ranks.size());
      g.lines.push_back(fmt::format("stage {} ran every action of {} and finishes it{} for {:.1f} s",
                                    s.rank, phase_step(s),
                                    replicas ? " (its gradients' all-reduce with its replicas)" : "",
                                    for_s));
      continue;
    }
    if (!plan || s.slot < 0 || s.slot >= static_cast<std::int64_t>(plan->size())) {
      g.lines.push_back(fmt::format("stage {} is at action {} of a plan it does not have", s.rank, s.slot));
      continue;
    }
    const sched::Action& a = (*plan)[static_cast<std::size_t>(s.slot)];
    if (s.state == StageState::running) {
      g.lines.push_back(fmt::format("stage {} runs {} of {} ({:.1f} s so far)", s.rank,
                                    a.str(), phase_step(s), for_s));
      if (now_ns - s.since_ns > stalled_for) {
        stalled_for = now_ns - s.since_ns;
        stalled_rank = s.rank;
        stalled = fmt::format("stalled: stage {} has been running {} of {} for {:.1f} s", s.rank,
                              a.str(), phase_step(s), for_s);
      }
      continue;
    }
    // Data-parallel replicas: rank s.rank is stage s.rank % P of the replica whose first
    // stage is `base` (actors/plan/replica_placement.hpp); it waits for stages of that replica.
    const int pipeline = static_cast<int>(c.placement.ranks.size());
    const int base = s.rank - s.rank % pipeline;
    const auto& chunks = c.placement.ranks.at(static_cast<std::size_t>(s.rank % pipeline)).chunks;
    const int ms = chunks.at(static_cast<std::size_t>(a.chunk)).model_stage;
    const int last = c.placement.model_stages() - 1;
    Need& need = needs[static_cast<std::size_t>(s.rank)];
    if (a.kind == sched::ActionKind::F && ms > 0) {
      need = Need{true, false, a.micro_batch};
      const auto& from = c.placement.chunk_of(ms - 1);
      need.from_rank = base + from.rank, need.from_chunk = from.chunk;
    } else if (sched::is_input_backward(a.kind) && ms < last) {
      need = Need{true, true, a.micro_batch};
      const auto& from = c.placement.chunk_of(ms + 1);
      need.from_rank = base + from.rank, need.from_chunk = from.chunk;
    }
    if (!need.exists) {
      g.lines.push_back(fmt::format("stage {} is ready to run {} of {} but has not started it "
                                    "({:.1f} s)",
                                    s.rank, a.str(), phase_step(s), for_s));
      if (stalled_rank < 0) stalled_rank = s.rank, stalled = "stalled: " + g.lines.back();
      continue;
    }
    const auto& sender = stages.at(static_cast<std::size_t>(need.from_rank));
    need.sent = produced(c, sender, s.round, need.gradient, need.from_chunk, need.micro_batch);
    const std::string what = fmt::format("{} {} micro-batch {}", need.gradient ? "B" : "F",
                                         phase_step(s), need.micro_batch);
    g.lines.push_back(fmt::format("stage {} waits for {} from stage {} ({}), to run {}, for {:.1f} s",
                                  s.rank, what, need.from_rank,
                                  need.sent ? "sent, never arrived" : "not sent", a.str(), for_s));
    if (need.sent) {
      if (lost_rank < 0) {
        lost_rank = need.from_rank;
        lost = fmt::format("message lost: {} from stage {} to stage {} was sent but never arrived",
                           what, need.from_rank, s.rank);
      }
    } else {
      g.waits_for[static_cast<std::size_t>(s.rank)] = need.from_rank;
    }
  }
  if (lost_rank >= 0) {
    g.verdict = lost, g.culprit = lost_rank;
    return g;
  }
  // A cycle: follow the waits-for edges from every stage.
  for (int start = 0; start < n; ++start) {
    std::vector<int> path;
    std::vector<int> seen(static_cast<std::size_t>(n), -1);
    for (int r = start; r >= 0 && seen[static_cast<std::size_t>(r)] < 0; r = g.waits_for[static_cast<std::size_t>(r)]) {
      seen[static_cast<std::size_t>(r)] = static_cast<int>(path.size());
      path.push_back(r);
      const int next = g.waits_for[static_cast<std::size_t>(r)];
      if (next >= 0 && seen[static_cast<std::size_t>(next)] >= 0) {
        std::string text = "deadlock: ";
        for (std::size_t i = static_cast<std::size_t>(seen[static_cast<std::size_t>(next)]); i < path.size(); ++i)
          text += fmt::format("stage {} → ", path[i]);
        g.verdict = text + fmt::format("stage {}", next);
        g.culprit = next;
        return g;
      }
    }
  }
  if (stalled_rank >= 0) {
    g.verdict = stalled, g.culprit = stalled_rank;
    return g;
  }
  // The end of the longest waits-for chain is where the pipeline stopped.
  int best = -1, best_len = -1;
  for (int start = 0; start < n; ++start) {
    int len = 0, r = start;
    while (g.waits_for[static_cast<std::size_t>(r)] >= 0 && len <= n) r = g.waits_for[static_cast<std::size_t>(r)], ++len;
    if (len > best_len) best_len = len, best = r;
  }
  if (best_len > 0 && stages.at(static_cast<std::size_t>(best)).state == StageState::idle) {
    g.verdict = fmt::format("stalled: stage {} is idle and has not received its next plan from "
                            "the coordinator", best);
    g.culprit = best;
  } else if (idle_rank >= 0) {
    g.verdict = "stalled: the coordinator sent no plan (" + idle + ")";
    g.culprit = -1;
  } else {
    g.verdict = fmt::format("stalled: stage {}", best);
    g.culprit = best;
  }
  return g;
}

}  // namespace conveyor::trace
