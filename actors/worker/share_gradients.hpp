#pragma once
// The weight gradients of a replica that runs several configured replicas' shares of the
// step (issue 44, a job shrunk to fewer replicas; the rule in gradient_shares.hpp): at
// the end of each share but the last, a chunk's gradients are moved aside and zeroed, so
// the next share accumulates from zero as its own replica would have; after the last
// share every share is combined in place as the configured replicas' group averaged them:
// ((g_0 + g_1) + … + g_{n−1}) / n, each addition and the division in f32, element by
// element.
//
// What must hold: for n = 2 that is the group's (g_0 + g_1) / 2 bit for bit (addition is
// commutative; a ring over 2 ranks adds each element once). For n > 2 a ring adds in an
// order that depends on the element's segment: the result is the same average within
// rounding, not bitwise (a shrink by more than half a configured ring says so).
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
