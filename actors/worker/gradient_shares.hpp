#pragma once
// Gradient shares (issue 44, shrinking replicas): one running replica that computes the
// micro-batches of several configured replicas keeps each configured replica's gradient
// apart, so that combining them reproduces the configured replicas' average bit for bit.
//
// With parallel.data R and M micro-batches a step, configured replica r computes global
// micro-batches r·M/R … (r+1)·M/R−1, scales each loss gradient by 1/(M/R) and accumulates
// its weight gradients g_r in micro-batch order from zero; the replicas' group then writes
// their average (Gloo's ring, transport/collective/gloo: for R = 2 one float addition,
// commutative, then an exact halving; for R > 2 the additions nested in an order fixed by
// each element's place in its bucket, actors/worker/gloo_ring_order.hpp, then the division
// by R). A replica that runs `shares` of those shares (a job
// shrunk from R to R / shares replicas) computes each share from zero, in micro-batch
// order, with the same scale: the same g_r, bit for bit, and combines them as the group
// did.
//
// What must hold for that: a chunk's weight-gradient actions (B, or W where the schedule
// splits backward) run in ascending micro-batch order, as every generated schedule does
// (stage_worker.hpp), so each share is a contiguous run ending at one action, and it runs
// its micro-batches in the order the configured replica's own schedule would. Input
// gradients (I) touch no weight gradient (StageModel's contract) and are ignored.
// Pure logic, no CAF, no model.
#include <cstddef>
#include <vector>

#include "actors/plan/schedule/action.hpp"

namespace conveyor {

/// Which share a replica-local micro-batch belongs to: micro_batch / (micro_batches /
/// shares). Throws std::invalid_argument unless shares >= 1 divides micro_batches and
/// 0 <= micro_batch < micro_batches.
int share_of(int micro_batch, int micro_batches, int shares);

/// Where one chunk's shares end in a step's action list: ends[s] is the slot of the
/// chunk's last weight-gradient action (B or W) of share s, so after it the share's
/// gradient is complete; the last entry is the chunk's last weight-gradient action.
struct ChunkShareEnds {
  std::vector<std::size_t> ends;  // one per share, ascending
};

/// Every chunk's share ends for a train step's `actions` (one rank's list), with
/// `micro_batches` micro-batches on this replica in `shares` shares. Throws
/// std::invalid_argument naming the action when a chunk's weight-gradient actions are
/// not in ascending micro-batch order, a chunk index is out of range, or a chunk has no
/// weight-gradient action for some share (it would have nothing to combine).
std::vector<ChunkShareEnds> share_ends(const std::vector<sched::Action>& actions, int chunks,
                                       int micro_batches, int shares);

}  // namespace conveyor
