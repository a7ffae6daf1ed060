#pragma once
// ZeRO-1 (optim.shard_state, issue 9): the R data-parallel replicas of a stage split its
// AdamW state. A model's parameters, flattened in parameter order, are cut into R
// contiguous, balanced element ranges; replica r keeps the moments of range r only and
// updates only those weights, then the replicas exchange the updated ranges (an all-gather)
// so every replica holds every weight again.
//
// Why this is exact: the gradients are averaged before the step (every replica holds the
// same bits), and AdamW works element by element, so each element's update is the same
// computation whichever replica runs it: a sharded run ends with the same bits as an
// unsharded one.
#include <cstdint>
#include <vector>

namespace conveyor {

/// Elements [begin, end) of a model's flattened parameters.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const ElementRange&) const = default;
};

/// Replica `rank`'s range of `total` elements split among `ranks` replicas: contiguous,
/// in rank order, covering [0, total) once, sizes differing by at most one (the first
/// total % ranks ranges have the extra element). Throws std::invalid_argument unless
/// 0 <= rank < ranks and total >= 0.
ElementRange replica_shard(std::int64_t total, int rank, int ranks);

/// The element counts of every rank's range, in rank order (replica_shard's sizes).
std::vector<std::int64_t> replica_shard_sizes(std::int64_t total, int ranks);

/// The part of `shard` inside the parameter at [offset, offset + count), as positions
/// within that parameter (empty, begin == end, when they do not meet).
ElementRange local_overlap(const ElementRange& shard, std::int64_t offset, std::int64_t count);

}  // namespace conveyor
