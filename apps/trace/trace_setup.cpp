#include "apps/trace/trace_setup.hpp"

#include "actors/plan/eval_plan.hpp"
#include "actors/trace/trace_plans.hpp"
#include "apps/train/run_dir.hpp"

namespace conveyor {

std::shared_ptr<trace::TraceSession> open_run_trace(const std::filesystem::path& run_dir,
                                                    const trace::StepRange& steps,
                                                    const JobPlan& plan,
                                                    const TraceProcess& process) {
  trace::TraceOptions options;
  options.dir = run_dir / "trace";
  options.steps = steps;
  options.process_index = process.node;
  options.clock_offset_ns = process.clock_offset_ns;
  // A buffer per stage actor of the job (R·P with replicas), whichever node runs it.
  auto session = std::make_shared<trace::TraceSession>(options, plan.stage_actors());
  if (process.node != 0) return session;  // node 0 writes the job's plans
  std::vector<std::vector<sched::Action>> eval;
  for (const auto& rank : plan.placement.ranks) eval.push_back(eval_actions(rank, 0, plan.eval_batches));
  write_file_atomically(options.dir / "schedule.json",
                        trace::trace_plans_json(plan.schedule, eval, plan.eval_wave(), plan.replicas)
                                .dump(1) + "\n");
  return session;
}

}  // namespace conveyor
