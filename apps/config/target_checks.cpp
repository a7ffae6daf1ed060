#include "apps/config/target_checks.hpp"

#include <string>

#include "actors/fault/fault_spec.hpp"
#include "actors/trace/step_range.hpp"
#include "apps/text/message_text.hpp"

namespace conveyor {
namespace {

using std::to_string;
using Kind = FaultSpec::Kind;

// Whether an entry of this kind names a checkpoint (by its completed steps), not a step.
bool names_checkpoint(Kind k) { return k == Kind::corrupt_checkpoint || k == Kind::slow_checkpoint; }

// Whether an entry of this kind names a stage (exit names a node, the checkpoint kinds
// neither).
bool names_stage(Kind k) { return k != Kind::exit && !names_checkpoint(k); }

std::optional<ConfigProblem> check_fault_entry(const RunConfig& c, const FaultSpec& f) {
  const std::int64_t actors = c.pipeline.stages * c.parallel.data;
  const std::string where = "entry '" + printable_excerpt(f.text) + "': ";
  if (names_stage(f.kind) && f.stage >= actors)
    return ConfigProblem{
        "fault.inject",
        where + "stage " + to_string(f.stage) + " does not exist: the run has " +
            to_string(actors) + " stage actors (pipeline.stages " +
            to_string(c.pipeline.stages) + " x parallel.data " + to_string(c.parallel.data) +
            ", numbered from 0)",
        "pipeline.stages"};
  if (f.micro_batch >= 0 && f.micro_batch >= c.pipeline.micro_batches)
    return ConfigProblem{"fault.inject",
                         where + "micro_batch " + to_string(f.micro_batch) +
                             " does not exist: a step has pipeline.micro_batches " +
                             to_string(c.pipeline.micro_batches) + " (numbered from 0)",
                         "pipeline.micro_batches"};
  if (f.step) {
    // The checkpoint kinds count completed steps (1..steps); the others name a step (0-based).
    const bool after = names_checkpoint(f.kind);
    const std::int64_t lo = after ? 1 : 0, hi = after ? c.train.steps : c.train.steps - 1;
    if (*f.step < lo || *f.step > hi)
      return ConfigProblem{"fault.inject",
                           where + "step " + to_string(*f.step) + " is never " +
                               (after ? "checkpointed" : "run") + ": train.steps " +
                               to_string(c.train.steps) + " gives steps " + to_string(lo) +
                               ".." + to_string(hi) +
                               (after ? " completed" : " (numbered from 0, as in metrics.jsonl)"),
                           "train.steps"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ConfigProblem> check_targets(const RunConfig& c) {
  for (const auto& entry : c.fault.inject)
    if (auto p = check_fault_entry(c, entry)) return p;
  if (c.trace.enabled) {
    if (const auto range = trace::StepRange::parse(c.trace.steps);
        range && range->first >= c.train.steps)
      return ConfigProblem{"trace.steps",
                           "'" + printable_excerpt(c.trace.steps) + "' starts after the last step: train.steps " +
                               to_string(c.train.steps) + " runs steps 0.." +
                               to_string(c.train.steps - 1) + " (numbered from 0)",
                           "train.steps"};
  }
  return std::nullopt;
}

}  // namespace conveyor
