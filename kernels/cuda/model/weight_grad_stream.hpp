#pragma once
// A second stream for the weight-gradient kernels of a fused backward (1F1B, GPipe on the
// embedding slice, and so one GPU's gradient accumulation). Block j's weight gradients
// need only what its input gradient left in the stash, and the next block's input
// gradient needs nothing of them, so queued on their own stream the two overlap on the
// device: the attention backward (about 30% of the tensor-core ceiling) and the memory-bound
// LayerNorm kernels run beside GEMMs. (ZBV with two chunks on one GPU, whose W and F/I
// actions sit on the two chunks' streams, ran 5% faster than 1F1B's one stream.)
//
// What must hold, and how the stage model keeps it:
// - Each parameter gradient still gets its += in the same order (all of them on this one
//   stream, in the order they were queued): the bits are the same as on one stream.
// - The side stream starts block j's kernels only after the compute stream has written
//   their inputs (fork).
// - Nothing the side stream reads is freed, and so reused by the compute stream, before the
//   side stream has read it: the compute stream waits for a half's mark before it releases
//   what that half's weight gradients read (join).
// - Before the backward returns, the compute stream joins the last mark, which follows
//   everything queued here: every later reader of the gradients (optimizer, norms,
//   all-reduce, snapshots) is ordered on the compute stream and needs nothing of this one.
#include <cuda_runtime_api.h>

#include <array>

#include "kernels/cuda/owned_stream.hpp"

namespace conveyor {

class WeightGradStream {
 public:
  explicit WeightGradStream(int device);
  ~WeightGradStream();
  WeightGradStream(const WeightGradStream&) = delete;
  WeightGradStream& operator=(const WeightGradStream&) = delete;

  cudaStream_t get() const { return stream_.get(); }

  /// Orders everything queued on this stream from now on after what `compute` holds now.
  void fork(cudaStream_t compute);
  /// Marks this stream's progress; returns the mark to join. Two marks are live at a time:
  /// a mark is recorded over two marks later.
  int mark();
  /// Makes `compute` wait (on the device, not the host) for `mark`'s work.
  void join(cudaStream_t compute, int mark);

 private:
  int device_;
  OwnedStream stream_;
  cudaEvent_t fork_ = nullptr;
  std::array<cudaEvent_t, 2> marks_{};
  int next_ = 0;
};

}  // namespace conveyor
