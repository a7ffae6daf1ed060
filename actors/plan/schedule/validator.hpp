#pragma once
// Checks that a schedule can run, before anything runs it. validate() throws InputError
// whose message is a one-line summary, then the step × rank grid (grid.hpp) with the
// failing cell(s) marked, e.g.
//   schedule custom: rank 1 chunk 0 micro-batch 2 has F but no B (nor I and W)
//              0      1      2 …
//   rank 0   0F0 …
//   rank 1   1F0    1F1  [*1F2*] …
// Checks, in order:
// 1. shape: one list per rank, every action's rank, micro-batch and chunk in range;
// 2. per (rank, chunk, micro-batch) exactly one F and either one B or one I and one W;
// 3. per rank, F before its B/I, I before its W;
// 4. with communication actions: every cross-rank input has one RECV before its consumer,
//    every cross-rank output one SEND after its producer, and each SEND a matching RECV;
// 5. a dry run (simulator.hpp, unit costs) does not deadlock: the cells marked are the
//    blocked ranks' next actions, the summary says what each waits for;
// 6. with communication actions: on every pipeline edge (a directed pair of model stages)
//    the receiver takes the messages in the order the sender sends them (what an in-order
//    channel such as NCCL needs). Two ranks can share several edges whose messages cross
//    (zbv), so one in-order channel per rank pair is not enough;
// 7. optional: at most max_activations micro-batches in flight per rank (activations.hpp);
// 8. optional: every rank runs its W (or B) of a chunk in micro-batch order.
#include <optional>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

struct ValidationOptions {
  std::optional<int> max_activations;  // per rank, see activations.hpp
  bool require_ordered_weight_grads = false;  // check 8
};

void validate(const Schedule& schedule, const ValidationOptions& options = {});

}  // namespace conveyor::sched
