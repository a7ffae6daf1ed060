#pragma once
// The data a stage draws its micro-batches from, as the plan hands it to every stage.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/data/micro_batch_sampler.hpp"
#include "kernels/data/token_corpus.hpp"
#include "kernels/tensor/dtype.hpp"

namespace conveyor {

/// What a stage needs to draw its own micro-batches (first and last model stage).
struct StageData {
  std::shared_ptr<const TokenCorpus> corpus;
  CorpusSplits splits;
  std::uint64_t seed = 0;
  std::int64_t micro_batch_size = 1;
  int micro_batches = 1;  // per train step: the loss is their mean
  // Data parallelism (actors/plan/replica_placement.hpp): this replica's train micro-batch i is
  // the step's global micro-batch first_micro_batch + i (its data and its loss's key);
  // micro_batches is then this replica's share. 0 with one replica.
  int first_micro_batch = 0;
  // A job shrunk to fewer replicas (issue 44): this replica computes the shares of this
  // many configured replicas, each from zero and scaled as its replica would have
  // (1 / (micro_batches / gradient_shares)), then averages them as their group did
  // (actors/worker/gradient_shares.hpp). 1: the replica's own micro-batches, as always.
  int gradient_shares = 1;
  // Several running replicas of a shrunk job (R' > 1 standing for R configured): by
  // replica (= rank in the stage group), the configured replicas' shares it computes,
  // contiguous in configured order. Each replica gathers every share over the group and
  // adds the R of them as the configured group did (actors/worker/share_gradients.hpp).
  // Empty: one replica, or replicas not shrunk (their group averages as always).
  std::vector<int> replica_shares;
  DType activation_dtype = DType::f32;  // of activations and gradients between stages
};

}  // namespace conveyor
