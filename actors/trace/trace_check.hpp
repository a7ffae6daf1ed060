#pragma once
// `conveyor trace check`: does the trace show the run the plans describe? Findings:
// - order: a stage ran its actions of a round in another order than its plan (or ran
//   too few or too many);
// - unmatched send: a message was sent and nobody recorded its receive;
// - unmatched receive: a receive cites a send that is not in the trace (or none);
// - out of order: on one link (sender → receiver, kind), a message sent later was
//   received earlier (links are FIFO: this means a transport reordered them).
// Without plans (no schedule.json) the order check is skipped and said so.
// A run that changed layout (issue 44) is checked round by round against the plans of the
// layout that ran each round (layout_switch.hpp). What a shrink leaves behind is not a
// finding but a note (relayout_rounds.hpp): the round it interrupted (its actions that
// never ran, its messages in flight), and the records the lost node's file did not keep
// (actions that ran short of their plan, message ends whose other end was its stage
// actor). Pure.
#include <string>
#include <vector>

#include "actors/trace/trace_set.hpp"

namespace conveyor::trace {

struct Finding {
  std::string kind;     // order | unmatched_send | unmatched_receive | out_of_order
  std::string message;  // one line, naming stage, step, micro-batch
};

struct CheckResult {
  std::vector<Finding> findings;
  std::size_t rounds_checked = 0;
  std::size_t messages_checked = 0;
  bool order_checked = false;  // false without plans
  /// One line each: the layouts and their rounds, what a shrink interrupted or lost, rounds
  /// of a layout schedule.json does not hold. Empty for a run that kept its layout.
  std::vector<std::string> notes;
  bool ok() const { return findings.empty(); }
};

CheckResult check_trace(const TraceSet& set);

}  // namespace conveyor::trace
