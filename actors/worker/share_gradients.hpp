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
// Host f32 gradients only (CPU models): a GPU model is refused when it is added.
// CAF-free; one thread (the stage's).
#include <cstddef>
#include <vector>

#include "kernels/model/stage_model.hpp"

namespace conveyor {

class ShareGradients {
 public:
  /// `shares` >= 2 shares of the step, over `chunks` (which outlive this object).
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
  /// Drops every share kept (an aborted step, a discarded one).
  void clear();

 private:
  int shares_;
  std::vector<StageModel*> chunks_;
  // By chunk, by ended share: its gradients flattened in parameter order.
  std::vector<std::vector<std::vector<float>>> kept_;
};

}  // namespace conveyor
