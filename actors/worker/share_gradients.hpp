#pragma once
// The weight gradients of a replica that runs several configured replicas' shares of the
// step (issue 44, a job shrunk to fewer replicas; the rule in gradient_shares.hpp): at
// the end of each share but the last, a chunk's gradients are moved aside and zeroed, so
// the next share accumulates from zero as its own replica would have; after the last
// share every share is combined in place as the configured replicas' group averaged them:
// bucket by bucket (StageModel::gradient_buckets(), the group's unit), each element's n
// shares added in the order Gloo's ring adds the n replicas' values of its place in the
// bucket (gloo_ring_order.hpp), then divided by n, each operation in f32.
//
// What must hold: that is the group's average bit for bit, for any n (for n = 2 simply
// (g_0 + g_1) / 2: addition is commutative). Tested against real Gloo groups of 2, 3 and 4
// (tests/actors/worker/share_gradients_test.cpp). Every gradient element lies in exactly
// one bucket (else combine throws).
// Several running replicas (R' > 1 standing for R configured, their shares spread
// unevenly, StageData::replica_shares): each replica keeps all its shares, the last too,
// and gather_and_combine all-gathers every replica's over the stage group (one Gloo
// allgatherv of R shares, each rank sending its own, the counts uneven), then adds the R
// shares as above: every replica ends with the R-replica group's bits.
// Host f32 gradients only (CPU models): a GPU model is refused when it is added.
// CAF-free; one thread (the stage's).
#include <cstddef>
#include <functional>
#include <vector>

#include "kernels/model/stage_model.hpp"
#include "transport/collective/gradient_all_reduce.hpp"

namespace conveyor {

class ShareGradients {
 public:
  /// `shares` >= 1 shares of the step (>= 2 unless gathered), over `chunks` (which
  /// outlive this object).
  /// Throws std::invalid_argument for a chunk whose gradients are not host f32.
  ShareGradients(int shares, std::vector<StageModel*> chunks);

  int shares() const { return shares_; }
  /// After the last weight-gradient action of a share that is not the last: the chunk's
  /// gradients become that share's sum, and the model's are zeroed.
  /// REQUIRES: shares end in order, each once per step.
  void end_share(std::size_t chunk);
  /// After the last share's last weight-gradient action: the chunk's gradients become
  /// the shares' average (above); the shares kept are dropped.
  /// REQUIRES: every earlier share ended this step. Throws std::logic_error otherwise.
  void combine(std::size_t chunk);
  /// Several running replicas, after this replica's last share's last weight-gradient
  /// action: every replica's shares of the chunk gathered over `group` (rank r holding
  /// replica_shares[r] of them, in configured order), then the chunk's gradients become
  /// the R = sum(replica_shares) shares' average (above). Blocking; returns its ms.
  /// REQUIRES: every earlier share ended this step, replica_shares[group rank] == shares(),
  /// the group not averaging a bucket (std::logic_error otherwise). Throws as
  /// GradientAllReduce::all_gather (the group is then broken).
  double gather_and_combine(std::size_t chunk, GradientAllReduce& group, const std::vector<int>& replica_shares);
  /// Drops every share kept (an aborted step, a discarded one).
  void clear();

 private:
  // Share s's values of the run of flat elements starting at `flat`, whose place in the
  // model's gradients is `at`.
  using ShareAt = std::function<const float*(int s, std::size_t flat, const float* at)>;
  // The chunk's gradients become the average of `n` shares in Gloo's ring order of n.
  void combine_shares(std::size_t chunk, int n, const ShareAt& share_at);
  std::size_t flat_size(std::size_t chunk) const;


  int shares_;
  std::vector<StageModel*> chunks_;
  // By chunk, by ended share: its gradients flattened in parameter order.
  std::vector<std::vector<std::vector<float>>> kept_;
  // By chunk, gathered: every configured replica's share, in configured order.
  std::vector<std::vector<float>> gathered_;
};

}  // namespace conveyor
