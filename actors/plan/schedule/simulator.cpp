#include "actors/plan/schedule/simulator.hpp"

#include "actors/plan/schedule/cost_checks.hpp"
#include "actors/plan/schedule/simulation.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

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
  const Simulation simulation(s, "simulate");  // checks the actions first
  check_costs(costs, s.spec.stages);
  return simulation.run([&](const Action& a) { return costs.duration_us(a); }, costs.message_us());
}

}  // namespace conveyor::sched
