#include "actors/plan/schedule/simulator.hpp"

#include "actors/plan/schedule/action_index.hpp"

#include <algorithm>

#include "actors/plan/schedule/activations.hpp"
#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/cost_checks.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {


struct Dep {
  Action needs;      // needs.stage: the rank that runs it
  int slot = -1;     // in that rank's list; -1 when no rank runs it
  double delay = 0;  // from its end to the moment the dependent may start
};

void check_per_rank(const std::vector<double>& v, const char* name, int ranks) {
  check_cost_list(v, "simulate", name, {1, static_cast<std::size_t>(ranks)},
                  "1 (all ranks) or " + std::to_string(ranks) + " (one per rank)");
}

void check_costs(const SimCosts& c, int ranks) {
  check_per_rank(c.f_us, "f_us", ranks);
  check_per_rank(c.b_us, "b_us", ranks);
  check_per_rank(c.i_us, "i_us", ranks);
  check_per_rank(c.w_us, "w_us", ranks);
  if (!(c.latency_us >= 0)) throw InputError("simulate: costs.latency_us must be >= 0");
  if (!(c.message_bytes >= 0)) throw InputError("simulate: costs.message_bytes must be >= 0");
  if (c.message_bytes > 0 && !(c.bandwidth_gb_s > 0)) {
    throw InputError("simulate: costs.bandwidth_gb_s must be > 0 when message_bytes > 0");
  }
}

void check_ranges(const Schedule& s) {
  if (s.spec.stages < 1 || s.spec.micro_batches < 1 ||
      s.ranks.size() != static_cast<std::size_t>(s.spec.stages)) {
    throw InputError("simulate: schedule " + s.spec.name + " has " + std::to_string(s.ranks.size()) +
                     " rank lists for stages = " + std::to_string(s.spec.stages));
  }
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Action& a : s.ranks[r]) {
      if (a.stage != static_cast<int>(r) || a.micro_batch < 0 ||
          a.micro_batch >= s.spec.micro_batches || a.chunk < 0 || a.chunk >= s.chunks_per_rank()) {
        throw InputError("simulate: action " + a.str() + " on rank " + std::to_string(r) +
                         " is outside the schedule (stages = " + std::to_string(s.spec.stages) +
                         ", micro_batches = " + std::to_string(s.spec.micro_batches) +
                         ", chunks per rank = " + std::to_string(s.chunks_per_rank()) +
                         "); run validate() for details");
      }
    }
  }
}

ActionKind recv_kind(ActionKind compute) {
  return compute == ActionKind::F ? ActionKind::RECV_F : ActionKind::RECV_B;
}

// What `a` waits for (see simulator.hpp for the model).
std::vector<Dep> deps_of(const Schedule& s, const ActionIndex& index, const Action& a, bool split,
                         bool with_comm, double message_us) {
  std::vector<Dep> deps;
  const auto add = [&](const Action& needs, double delay) {
    deps.push_back({needs, index.slot(needs), delay});
  };
  const int r = a.stage;
  switch (a.kind) {
    case ActionKind::F:
    case ActionKind::B:
    case ActionKind::I: {
      if (a.kind != ActionKind::F) add({r, ActionKind::F, a.micro_batch, a.chunk}, 0.0);
      const auto from = detail::producer_of(s, a, split);
      if (!from) break;
      if (from->stage == r) {
        add(*from, 0.0);
      } else if (with_comm) {
        add({r, recv_kind(a.kind), a.micro_batch, a.chunk}, 0.0);
      } else {
        add(*from, message_us);
      }
      break;
    }
    case ActionKind::W:
      add({r, ActionKind::I, a.micro_batch, a.chunk}, 0.0);
      break;
    case ActionKind::SEND_F:
    case ActionKind::SEND_B:
      add(*detail::compute_of(a, split), 0.0);
      break;
    case ActionKind::RECV_F:
    case ActionKind::RECV_B: {
      const auto peer = detail::peer_of(s, a, split);
      if (peer) {
        add(*peer, peer->stage == r ? 0.0 : message_us);
      } else {
        deps.push_back({a, -1, 0.0});  // a receive with no sender: waits forever
      }
      break;
    }
  }
  return deps;
}

std::string describe(const Schedule& s, const Wait& w, bool split) {
  const std::string rank = "rank " + std::to_string(w.rank);
  if (w.needs == w.action) return rank + "'s " + w.action.str() + " has no sender";
  Action data = w.needs;  // a SEND stands for the compute action whose output it carries
  if (is_send(data.kind)) data = *detail::compute_of(data, split);
  std::string what = std::string(kind_name(data.kind)) + " mb " + std::to_string(data.micro_batch);
  const std::string chunk =
      s.chunks_per_rank() > 1 ? " (chunk " + std::to_string(data.chunk) + ")" : "";
  if (w.needs.stage == w.rank) {
    return rank + " waits for its own " + what + chunk + ", which " +
           (w.needs_exists ? "comes later in its list" : "is not in its list");
  }
  const std::string from = "rank " + std::to_string(w.needs.stage);
  return rank + " waits for " + what + " from " + from + chunk +
         (w.needs_exists ? "" : ", which " + from + " never runs");
}

}  // namespace

SimCosts SimCosts::uniform(double f, double b, double i, double w) {
  SimCosts c;
  c.f_us = {f};
  c.b_us = {b};
  c.i_us = {i};
  c.w_us = {w};
  return c;
}

double SimCosts::duration_us(const Action& action) const {
  if (!action_us.empty()) {
    auto it = action_us.find(action.str(true));
    if (it != action_us.end()) return it->second;
  }
  return duration_us(action.stage, action.kind);
}

double SimCosts::duration_us(int rank, ActionKind kind) const {
  const auto pick = [rank](const std::vector<double>& v) {
    return v.size() == 1 ? v[0] : v.at(static_cast<std::size_t>(rank));
  };
  switch (kind) {
    case ActionKind::F: return pick(f_us);
    case ActionKind::B: return pick(b_us);
    case ActionKind::I: return pick(i_us);
    case ActionKind::W: return pick(w_us);
    default: return 0.0;
  }
}

double SimCosts::message_us() const {
  if (message_bytes <= 0) return latency_us;
  return latency_us + message_bytes / (bandwidth_gb_s * 1e3);  // 1 GB/s = 1e3 bytes/µs
}

SimResult simulate(const Schedule& s, const SimCosts& costs) {
  check_ranges(s);
  const int p = s.spec.stages;
  check_costs(costs, p);
  const bool split = splits_backward(s);
  const bool with_comm = has_communication(s);
  const ActionIndex index(s);
  const double message = costs.message_us();

  std::vector<std::vector<std::vector<Dep>>> deps(p);
  for (int r = 0; r < p; ++r) {
    for (const Action& a : s.ranks[r]) deps[r].push_back(deps_of(s, index, a, split, with_comm, message));
  }

  SimResult out;
  out.timings.resize(p);
  out.busy.assign(p, 0.0);
  std::vector<std::size_t> next(p, 0);  // ranks[r][0, next[r]) have run
  std::vector<double> free_at(p, 0.0);
  const auto done = [&](const Dep& d) {
    return d.slot >= 0 && static_cast<std::size_t>(d.slot) < next[d.needs.stage];
  };
  // Start times depend only on the ends of earlier actions, so sweeping the ranks in any
  // order until nothing moves gives the event-driven result.
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < s.ranks[r].size()) {
        const auto& need = deps[r][next[r]];
        if (!std::all_of(need.begin(), need.end(), done)) break;
        double start = free_at[r];
        for (const Dep& d : need) {
          start = std::max(start, out.timings[d.needs.stage][d.slot].end_us + d.delay);
        }
        const Action& a = s.ranks[r][next[r]];
        const double duration = costs.duration_us(a);
        out.timings[r].push_back({a, start, start + duration});
        out.busy[r] += duration;
        free_at[r] = start + duration;
        ++next[r];
        progress = true;
      }
    }
  }

  for (int r = 0; r < p; ++r) {
    if (next[r] == s.ranks[r].size()) continue;
    for (const Dep& d : deps[r][next[r]]) {
      if (done(d)) continue;
      out.waits.push_back({r, next[r], s.ranks[r][next[r]], d.needs, d.slot >= 0});
      break;
    }
  }
  if (!out.waits.empty()) {
    std::string msg = "deadlock: ";
    for (std::size_t k = 0; k < out.waits.size(); ++k) {
      msg += (k ? "; " : "") + describe(s, out.waits[k], split);
    }
    out.deadlock = msg;
  }

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

}  // namespace conveyor::sched
