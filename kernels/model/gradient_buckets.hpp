#pragma once
// A stage model's weight gradients seen as buckets for data-parallel averaging (issue 9):
// each bucket is a few contiguous spans of the model's own gradient memory (host memory
// for a CPU model, device memory of its GPU for a CUDA model), averaged in place as one
// unit by the stage's replica group.
//
// Overlap (issue 9, item 3): during the last backward of a step the model can say when
// each bucket's gradients are final, so its all-reduce starts while the model still
// computes the gradients of the other buckets. "Final" means: computed (CPU), or every
// kernel that adds to the bucket queued on the model's compute stream (GPU; the reducer
// orders itself after that stream, see StageModel::compute_stream()).
//
// What must hold: a model returns the same buckets (count, order, sizes, dtypes) every
// time and on every replica of its chunk, and names each bucket final exactly once per
// armed backward, in the same order on every replica (the all-reduces of a group run in
// start order on every rank).
#include <cstddef>
#include <functional>
#include <vector>

#include "kernels/tensor/dtype.hpp"

namespace conveyor {

/// `count` elements of `dtype` at `data`, in the model's memory. Not owned.
struct GradientSpan {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
};

/// One bucket: its spans, in a fixed order.
using GradientSpans = std::vector<GradientSpan>;

/// Called with a bucket's index once its gradients are final (see above), on the thread
/// that runs the backward.
using BucketFinal = std::function<void(std::size_t bucket)>;

}  // namespace conveyor
