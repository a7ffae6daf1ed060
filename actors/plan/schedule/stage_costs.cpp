#include "actors/plan/schedule/stage_costs.hpp"

#include "actors/plan/schedule/action_index.hpp"

#include <algorithm>
#include <string>

#include "actors/plan/schedule/activations.hpp"
#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/cost_checks.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

void check_sizes(const std::vector<double>& v, const char* name, int stages) {
  check_cost_list(v, "simulate_stages", name, {static_cast<std::size_t>(stages)},
                  "one per model stage (" + std::to_string(stages) + ")");
}

void check_costs(const StageCosts& costs, int stages) {
  check_sizes(costs.f_us, "f_us", stages);
  check_sizes(costs.b_us, "b_us", stages);
  check_sizes(costs.i_us, "i_us", stages);
  check_sizes(costs.w_us, "w_us", stages);
  if (!(costs.message_us >= 0)) throw InputError("simulate_stages: costs.message_us must be >= 0");
}


void check_actions(const Schedule& s) {
  if (s.spec.stages < 1 || s.spec.micro_batches < 1 || s.ranks.size() != static_cast<std::size_t>(s.spec.stages)) {
    throw InputError("simulate_stages: schedule " + s.spec.name + " has " + std::to_string(s.ranks.size()) +
                     " rank lists for stages = " + std::to_string(s.spec.stages));
  }
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.stage != static_cast<int>(r) || a.micro_batch < 0 || a.micro_batch >= s.spec.micro_batches ||
          a.chunk < 0 || a.chunk >= s.chunks_per_rank()) {
        throw InputError("simulate_stages: action " + a.str() + " on rank " + std::to_string(r) +
                         " is outside the schedule; run validate() for details");
      }
    }
  }
}

}  // namespace

// The compute-only schedule with, per action, its model stage and what it waits for,
// flattened: deps of ranks[r][k] are deps[first[r][k] .. first[r][k + 1]).
struct StageSimulator::Impl {
  struct Dep {
    int rank = 0;
    int slot = -1;         // -1: no rank runs it (the schedule cannot finish)
    bool message = false;  // crosses ranks: arrives message_us after its end
  };

  Schedule schedule;
  bool single_chunk = false;  // then run() is simulate() with per-rank costs
  std::vector<std::vector<int>> stage;  // model stage of each action
  std::vector<std::vector<std::size_t>> first;
  std::vector<Dep> deps;
  std::vector<int> peaks;

  explicit Impl(const Schedule& s) : schedule(has_communication(s) ? strip_communication(s) : s) {
    check_actions(schedule);
    single_chunk = schedule.chunks_per_rank() == 1;
    if (single_chunk) return;
    const Schedule& c = schedule;
    const bool split = splits_backward(c);
    const ActionIndex index(c);
    const auto add = [&](const Action& needs, bool message) {
      deps.push_back({needs.stage, index.slot(needs), message});
    };
    for (std::size_t r = 0; r < c.ranks.size(); ++r) {
      stage.emplace_back();
      first.emplace_back();
      for (const Action& a : c.ranks[r]) {
        stage.back().push_back(c.model_stage(a.stage, a.chunk));
        first.back().push_back(deps.size());
        if (a.kind == ActionKind::W) {
          add({a.stage, ActionKind::I, a.micro_batch, a.chunk}, false);
          continue;
        }
        if (a.kind != ActionKind::F) add({a.stage, ActionKind::F, a.micro_batch, a.chunk}, false);
        if (const auto from = detail::producer_of(c, a, split)) add(*from, from->stage != a.stage);
      }
      first.back().push_back(deps.size());
    }
    peaks = peak_activations(c);
  }

  SimResult run_chunked(const StageCosts& costs) const {
    const Schedule& s = schedule;
    const int p = s.spec.stages;
    SimResult out;
    out.timings.resize(p);
    out.busy.assign(p, 0.0);
    std::vector<std::size_t> next(p, 0);
    std::vector<double> free_at(p, 0.0);
    const auto done = [&](const Dep& d) { return d.slot >= 0 && static_cast<std::size_t>(d.slot) < next[d.rank]; };
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < p; ++r) {
        const auto& list = s.ranks[r];
        while (next[r] < list.size()) {
          const std::size_t k = next[r];
          const Dep* begin = deps.data() + first[r][k];
          const Dep* end = deps.data() + first[r][k + 1];
          if (!std::all_of(begin, end, done)) break;
          double start = free_at[r];
          for (const Dep* d = begin; d != end; ++d) {
            start = std::max(start, out.timings[d->rank][d->slot].end_us + (d->message ? costs.message_us : 0.0));
          }
          const auto m = static_cast<std::size_t>(stage[r][k]);
          double took = 0.0;
          switch (list[k].kind) {
            case ActionKind::F: took = costs.f_us[m]; break;
            case ActionKind::B: took = costs.b_us[m]; break;
            case ActionKind::I: took = costs.i_us[m]; break;
            default: took = costs.w_us[m]; break;
          }
          out.timings[r].push_back({list[k], start, start + took});
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
      const Action& a = s.ranks[r][next[r]];
      out.waits.push_back({r, next[r], a, a, true});
      stuck += (stuck.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " cannot run " + a.str(true);
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
    out.peak_activations = peaks;
    return out;
  }
};

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

StageSimulator::StageSimulator(const Schedule& schedule) : impl_(std::make_unique<Impl>(schedule)) {}
StageSimulator::~StageSimulator() = default;
StageSimulator::StageSimulator(StageSimulator&&) noexcept = default;
StageSimulator& StageSimulator::operator=(StageSimulator&&) noexcept = default;

SimResult StageSimulator::run(const StageCosts& costs) const {
  check_costs(costs, impl_->schedule.model_stages());
  if (!impl_->single_chunk) return impl_->run_chunked(costs);
  SimCosts per_rank;  // model stage r is rank r
  per_rank.f_us = costs.f_us;
  per_rank.b_us = costs.b_us;
  per_rank.i_us = costs.i_us;
  per_rank.w_us = costs.w_us;
  per_rank.latency_us = costs.message_us;
  return simulate(impl_->schedule, per_rank);
}

SimResult simulate_stages(const Schedule& schedule, const StageCosts& costs) {
  return StageSimulator(schedule).run(costs);
}

}  // namespace conveyor::sched
