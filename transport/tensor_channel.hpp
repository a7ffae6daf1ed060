#pragma once
// Moving a tensor from the stage that produced it to the device of the stage that
// consumes it, inside one process. The consumer's worker calls receive() on every
// activation and gradient before computing with it.
//
//   edge                         channel        what receive() does
//   CPU → CPU                    hand-off       returns the same handle (no copy)
//   GPU a → GPU a                hand-off       same handle; the consumer waits on the
//                                               tensor's ready event on its stream
//   GPU a → GPU b                cuda-peer      cudaMemcpyPeerAsync on a copy stream of b,
//                                               after a's ready event; the copy gets its own
//                                               ready event (no host synchronisation)
//   CPU ↔ GPU (staging)          host-staging   a copy through the CUDA runtime
// Thread-safety: a channel belongs to one consuming stage (one thread).
#include <memory>
#include <string>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class TensorChannel {
 public:
  virtual ~TensorChannel() = default;
  /// A tensor with the same contents usable on the consumer's device.
  virtual Tensor receive(const Tensor& sent) = 0;
  /// "hand-off", "cuda-peer", ... for plans and traces.
  virtual std::string name() const = 0;
};

/// The receiving side of every in-process edge into `consumer`: hand-off when the tensor
/// already lives there, cuda-peer between GPUs. Throws std::invalid_argument for an edge
/// this build cannot serve (a GPU tensor in a build without CUDA).
std::unique_ptr<TensorChannel> make_in_process_channel(Device consumer);

}  // namespace conveyor
