#include "apps/trace/trace_setup.hpp"

#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "actors/plan/eval_plan.hpp"
#include "actors/trace/trace_plans.hpp"
#include "apps/train/run_dir.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

std::filesystem::path schedule_file(const std::filesystem::path& run_dir) {
  return run_dir / "trace" / "schedule.json";
}

// One layout's plans as schedule.json holds them (trace_plans.hpp).
nlohmann::json layout_json(const JobPlan& plan, const trace::LayoutPlace& place) {
  std::vector<std::vector<sched::Action>> eval;
  for (const auto& rank : plan.placement.ranks) eval.push_back(eval_actions(rank, 0, plan.eval_batches));
  return trace::trace_plans_json(plan.schedule, eval, plan.eval_wave(), plan.replicas, place);
}

}  // namespace

std::shared_ptr<trace::TraceSession> open_run_trace(const std::filesystem::path& run_dir,
                                                    const trace::StepRange& steps,
                                                    const JobPlan& plan,
                                                    const TraceProcess& process,
                                                    const std::vector<int>& node_of_actor) {
  trace::TraceOptions options;
  options.dir = run_dir / "trace";
  options.steps = steps;
  options.process_index = process.node;
  options.clock_offset_ns = process.clock_offset_ns;
  // A buffer per stage actor of the job (R·P with replicas), whichever node runs it.
  auto session = std::make_shared<trace::TraceSession>(options, plan.stage_actors());
  if (process.node != 0) return session;  // node 0 writes the job's plans
  write_file_atomically(schedule_file(run_dir), layout_json(plan, {0, node_of_actor}).dump(1) + "\n");
  return session;
}

void add_run_trace_layout(const std::filesystem::path& run_dir, const JobPlan& plan,
                          const std::vector<int>& node_of_actor, int generation) {
  const auto file = schedule_file(run_dir);
  std::ifstream in(file);
  if (!in)
    throw std::runtime_error(
        fmt::format("{}: cannot read it to add layout generation {}", file.string(), generation));
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not a plans document ({})", file.string(), e.what()));
  }
  trace::add_relayout(doc, layout_json(plan, {generation, node_of_actor}));
  write_file_atomically(file, doc.dump(1) + "\n");
}

}  // namespace conveyor
