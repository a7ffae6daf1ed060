#pragma once
// Data parallelism (parallel.data: R, issue 9): R replicas of one P-stage pipeline run as
// R·P stage actors, numbered replica-major: replica r, pipeline stage s is actor r·P + s.
// Every replica holds the same model pieces on the same stages (the pipeline's Placement);
// only the data differs: each takes its own share of the step's micro-batches.
//
// What must hold: with R = 1 actor s is pipeline stage s, so every existing path sees
// exactly the numbering it had. The union of the replicas' shares is the step's global
// micro-batches 0 … M−1, each once, so the global batch does not depend on R.
// Pure logic: no CAF.
#include "actors/plan/placement.hpp"

namespace conveyor {

struct ReplicaLayout {
  int replicas = 1;  // R
  int stages = 1;    // P: pipeline ranks of one replica

  int actors() const { return replicas * stages; }
  int actor(int replica, int stage) const { return replica * stages + stage; }
  int replica_of(int actor) const { return actor / stages; }
  int stage_of(int actor) const { return actor % stages; }
};

/// The global micro-batches one replica computes in a train step: first … first+count−1.
struct MicroBatchShare {
  int first = 0;
  int count = 0;
  bool operator==(const MicroBatchShare&) const = default;
};

/// Replica r of R takes micro-batches r·(M/R) … (r+1)·(M/R)−1 of the step.
/// Throws std::invalid_argument unless 1 <= R, M % R == 0 and 0 <= replica < R.
MicroBatchShare micro_batch_share(int micro_batches, int replicas, int replica);

/// The configured replicas a running replica stands for (issue 44, a job shrunk from R
/// configured replicas to R' running ones): configured replicas first … first+count−1.
/// They are contiguous and in replica order, so the running replicas' shares, rank after
/// rank, are the configured replicas' in order (what the shares' all-gather relies on,
/// actors/worker/share_gradients.hpp); the first R mod R' running replicas take one more.
struct ConfiguredShares {
  int first = 0;
  int count = 1;
  bool operator==(const ConfiguredShares&) const = default;
};

/// Running replica r of R' standing for R configured replicas (see above). R' == R: each
/// its own; R' == 1: all of them. Throws std::invalid_argument unless 1 <= R' <= R and
/// 0 <= replica < R'.
ConfiguredShares configured_shares(int configured, int running, int replica);

/// The global micro-batches of those shares: configured replica c's are c·(M/R) …
/// (c+1)·(M/R)−1 (micro_batch_share), so replica r of R' computes first·(M/R) …
/// (first+count)·(M/R)−1. The same as micro_batch_share(M, R', r) where R' divides R.
/// Throws std::invalid_argument as both functions.
MicroBatchShare shares_micro_batches(int micro_batches, int configured, int running, int replica);

/// What actor `actor` runs: its pipeline stage's chunks and device, numbered as the actor
/// (rank = actor) and marked with its replica.
/// REQUIRES: 0 <= actor < layout.actors(); pipeline holds layout.stages ranks.
RankPlacement replica_rank_placement(const Placement& pipeline, const ReplicaLayout& layout,
                                     int actor);

}  // namespace conveyor
