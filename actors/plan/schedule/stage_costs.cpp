#include "actors/plan/schedule/stage_costs.hpp"

#include <string>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/cost_checks.hpp"
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

double StageCosts::duration_us(int model_stage, ActionKind kind) const {
  const auto m = static_cast<std::size_t>(model_stage);
  switch (kind) {
    case ActionKind::F: return f_us[m];
    case ActionKind::B: return b_us[m];
    case ActionKind::I: return i_us[m];
    case ActionKind::W: return w_us[m];
    default: return 0.0;
  }
}

StageSimulator::StageSimulator(const Schedule& schedule)
    : simulation_(has_communication(schedule) ? strip_communication(schedule) : schedule, "simulate_stages") {
  const Schedule& s = simulation_.schedule();
  for (int r = 0; r < s.spec.stages; ++r)
    for (int c = 0; c < s.chunks_per_rank(); ++c) model_stage_.push_back(s.model_stage(r, c));
}

SimResult StageSimulator::run(const StageCosts& costs) const {
  const Schedule& s = simulation_.schedule();
  check_costs(costs, s.model_stages());
  const int chunks = s.chunks_per_rank();
  const auto duration = [&](const Action& a) {
    return costs.duration_us(model_stage_[static_cast<std::size_t>(a.stage * chunks + a.chunk)], a.kind);
  };
  return simulation_.run(duration, costs.message_us);
}

SimResult simulate_stages(const Schedule& schedule, const StageCosts& costs) {
  return StageSimulator(schedule).run(costs);
}

}  // namespace conveyor::sched
