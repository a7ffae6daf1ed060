#pragma once
// The wait-for graph of a stuck pipeline, from the stages' published states and their
// plans: one line per stage saying what it runs or waits for and from whom, e.g.
//   stage 2 waits for F step 2 micro-batch 1 from stage 1 (not sent)
// and a verdict naming the root cause: a message that was sent but never arrived, a
// cycle of stages waiting for each other, or a stage stalled in an action (or idle,
// waiting for the coordinator). Pure: no CAF, no clock (now is an argument).
//
// "Sent" is inferred from the sender's progress: a sender past the producing action (or
// already in a later round) has produced the message, since outputs are sent as soon as
// they exist.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/plan/placement.hpp"
#include "actors/plan/schedule/action.hpp"
#include "actors/trace/stage_progress.hpp"

namespace conveyor::trace {

struct WaitForContext {
  std::vector<std::vector<sched::Action>> train_plans;  // per rank, as the coordinator sends
  // Per rank, the whole evaluation (eval_actions(rank, 0, eval_batches)); it runs in waves
  // of eval_wave micro-batches, a round each (actors/plan/eval_plan.hpp).
  std::vector<std::vector<sched::Action>> eval_plans;
  int eval_wave = 1;
  // One replica's pipeline; ranks past it are data-parallel replicas (replica-major).
  Placement placement;
};

struct WaitForGraph {
  std::vector<std::string> lines;  // one per stage, in rank order
  std::string verdict;             // "message lost: …", "deadlock: …", "stalled: …"
  int culprit = -1;                // the stage the verdict blames (-1: the coordinator)
  std::vector<int> waits_for;      // per rank: the rank it waits for, or -1
};

WaitForGraph build_wait_for_graph(const std::vector<StageSnapshot>& stages,
                                  const WaitForContext& context, std::int64_t now_ns);

}  // namespace conveyor::trace
