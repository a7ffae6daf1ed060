#pragma once
// The seam between a stage's worker and whoever watches its actions (the tracer, the hang
// watchdog): plain data in, no actors. It lives with the plan so the trace library can
// implement it without depending on the stage.
#include <cstddef>

#include "actors/plan/protocol.hpp"

namespace conveyor {

/// Told when each action of a plan starts and ends (the tracer, the hang watchdog).
/// Called on the worker's thread, around each action; must not throw.
class ActionListener {
 public:
  virtual ~ActionListener() = default;
  virtual void action_started(const StepPlan& plan, std::size_t slot) = 0;
  virtual void action_finished(const StepPlan& plan, std::size_t slot,
                               const ActionTiming& timing) = 0;
};

}  // namespace conveyor
