#pragma once
// `conveyor trace check`: does the trace show the run the plans describe? Findings:
// - order: a stage ran its actions of a round in another order than its plan (or ran
//   too few or too many);
// - unmatched send: a message was sent and nobody recorded its receive;
// - unmatched receive: a receive cites a send that is not in the trace (or none);
// - out of order: on one link (sender → receiver, kind), a message sent later was
//   received earlier (links are FIFO: this means a transport reordered them).
// Without plans (no schedule.json) the order check is skipped and said so. Pure.
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
  bool ok() const { return findings.empty(); }
};

CheckResult check_trace(const TraceSet& set);

}  // namespace conveyor::trace
