#include "actors/schedule/stage_costs.hpp"

#include <algorithm>
#include <string>

#include "actors/schedule/activations.hpp"
#include "actors/schedule/comm_pass.hpp"
#include "actors/schedule/dependencies.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

void check_sizes(const std::vector<double>& v, const char* name, int stages) {
  if (v.size() != static_cast<std::size_t>(stages)) {
    throw InputError(std::string("simulate_stages: costs.") + name + " has " + std::to_string(v.size()) +
                     " values; give one per model stage (" + std::to_string(stages) + ")");
  }
  for (double d : v) {
    if (!(d >= 0)) throw InputError(std::string("simulate_stages: costs.") + name + " must be >= 0");
  }
}

// Slot of (rank, kind, micro-batch, chunk) in its rank's list, or -1; compute kinds only.
class ComputeIndex {
 public:
  explicit ComputeIndex(const Schedule& s)
      : chunks_(s.chunks_per_rank()), micro_batches_(s.spec.micro_batches) {
    slots_.resize(s.ranks.size());
    for (std::size_t r = 0; r < s.ranks.size(); ++r) {
      slots_[r].assign(static_cast<std::size_t>(4 * chunks_ * micro_batches_), -1);
      for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
        int& slot = slots_[r][key(s.ranks[r][k])];
        if (slot < 0) slot = static_cast<int>(k);
      }
    }
  }
  int slot(const Action& a) const { return slots_[a.stage][key(a)]; }

 private:
  std::size_t key(const Action& a) const {
    return static_cast<std::size_t>((static_cast<int>(a.kind) * chunks_ + a.chunk) * micro_batches_ +
                                    a.micro_batch);
  }
  int chunks_;
  int micro_batches_;
  std::vector<std::vector<int>> slots_;
};

struct Dep {
  int rank = 0;
  int slot = -1;  // -1: no rank runs it (the schedule cannot finish)
  double delay = 0.0;
};

void check_actions(const Schedule& s) {
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.stage != static_cast<int>(r) || !is_compute(a.kind) || a.micro_batch < 0 ||
          a.micro_batch >= s.spec.micro_batches || a.chunk < 0 || a.chunk >= s.chunks_per_rank()) {
        throw InputError("simulate_stages: action " + a.str() + " on rank " + std::to_string(r) +
                         " is outside the schedule; run validate() for details");
      }
    }
  }
}

SimResult simulate_chunked(const Schedule& s, const StageCosts& costs) {
  check_actions(s);
  const int p = s.spec.stages;
  const bool split = splits_backward(s);
  const ComputeIndex index(s);
  const auto duration = [&](const Action& a) {
    const auto stage = static_cast<std::size_t>(s.model_stage(a.stage, a.chunk));
    switch (a.kind) {
      case ActionKind::F: return costs.f_us[stage];
      case ActionKind::B: return costs.b_us[stage];
      case ActionKind::I: return costs.i_us[stage];
      default: return costs.w_us[stage];
    }
  };
  const auto deps_of = [&](const Action& a) {
    std::vector<Dep> deps;
    const auto add = [&](const Action& needs, double delay) {
      deps.push_back({needs.stage, index.slot(needs), delay});
    };
    if (a.kind == ActionKind::W) {
      add({a.stage, ActionKind::I, a.micro_batch, a.chunk}, 0.0);
      return deps;
    }
    if (a.kind != ActionKind::F) add({a.stage, ActionKind::F, a.micro_batch, a.chunk}, 0.0);
    if (const auto from = detail::producer_of(s, a, split)) {
      add(*from, from->stage == a.stage ? 0.0 : costs.message_us);
    }
    return deps;
  };

  std::vector<std::vector<std::vector<Dep>>> deps(p);
  for (int r = 0; r < p; ++r) {
    for (const Action& a : s.ranks[r]) deps[r].push_back(deps_of(a));
  }
  SimResult out;
  out.timings.resize(p);
  out.busy.assign(p, 0.0);
  std::vector<std::size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);
  const auto done = [&](const Dep& d) {
    return d.slot >= 0 && static_cast<std::size_t>(d.slot) < next[d.rank];
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < s.ranks[r].size()) {
        const auto& need = deps[r][next[r]];
        if (!std::all_of(need.begin(), need.end(), done)) break;
        double start = free_at[r];
        for (const Dep& d : need) start = std::max(start, out.timings[d.rank][d.slot].end_us + d.delay);
        const Action& a = s.ranks[r][next[r]];
        const double took = duration(a);
        out.timings[r].push_back({a, start, start + took});
        out.busy[r] += took;
        free_at[r] = start + took;
        ++next[r];
        progress = true;
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < p; ++r) {
    if (next[r] == s.ranks[r].size()) continue;
    out.waits.push_back({r, next[r], s.ranks[r][next[r]], s.ranks[r][next[r]], true});
    stuck += (stuck.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " cannot run " +
             s.ranks[r][next[r]].str(s.chunks_per_rank() > 1);
  }
  if (!stuck.empty()) out.deadlock = "deadlock: " + stuck + " (simulate() names what each waits for)";

  for (const auto& list : out.timings) {
    for (const TimedAction& t : list) out.makespan = std::max(out.makespan, t.end_us);
  }
  double idle_total = 0.0;
  for (int r = 0; r < p; ++r) {
    out.idle.push_back(out.makespan - out.busy[r]);
    out.stage_bubble.push_back(out.makespan > 0 ? out.idle[r] / out.makespan : 0.0);
    idle_total += out.idle[r];
  }
  out.bubble = out.makespan > 0 ? idle_total / (p * out.makespan) : 0.0;
  out.peak_activations = peak_activations(s);
  return out;
}

}  // namespace

StageCosts StageCosts::from_fiw(std::vector<double> f, std::vector<double> i, std::vector<double> w,
                                double message_us) {
  StageCosts c;
  c.b_us.resize(i.size());
  for (std::size_t k = 0; k < i.size() && k < w.size(); ++k) c.b_us[k] = i[k] + w[k];
  c.f_us = std::move(f);
  c.i_us = std::move(i);
  c.w_us = std::move(w);
  c.message_us = message_us;
  return c;
}

SimResult simulate_stages(const Schedule& schedule, const StageCosts& costs) {
  if (schedule.spec.stages < 1 || schedule.ranks.size() != static_cast<std::size_t>(schedule.spec.stages)) {
    throw InputError("simulate_stages: schedule " + schedule.spec.name + " has " +
                     std::to_string(schedule.ranks.size()) + " rank lists for stages = " +
                     std::to_string(schedule.spec.stages));
  }
  const int stages = schedule.model_stages();
  check_sizes(costs.f_us, "f_us", stages);
  check_sizes(costs.b_us, "b_us", stages);
  check_sizes(costs.i_us, "i_us", stages);
  check_sizes(costs.w_us, "w_us", stages);
  if (!(costs.message_us >= 0)) throw InputError("simulate_stages: costs.message_us must be >= 0");

  if (schedule.chunks_per_rank() == 1) {  // model stage r is rank r
    SimCosts per_rank;
    per_rank.f_us = costs.f_us;
    per_rank.b_us = costs.b_us;
    per_rank.i_us = costs.i_us;
    per_rank.w_us = costs.w_us;
    per_rank.latency_us = costs.message_us;
    return simulate(schedule, per_rank);
  }
  return simulate_chunked(has_communication(schedule) ? strip_communication(schedule) : schedule,
                          costs);
}

}  // namespace conveyor::sched
