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
// armed backward, in an order that depends only on the call (so the same on every replica) (the all-reduces of a group run in
// start order on every rank).
#include <cstddef>
#include <functional>
#include <string>
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

/// model.tie_embeddings: the gradient of one copy of the tied tensor (wte.weight on the
/// embedding slice, lm_head.weight on the head slice), by parameter index in the chunk.
struct TiedGradient {
  std::size_t param = 0;
  bool head = false;  // the LM head's copy (its square is left out of the gradient norm)
  GradientSpan span;
};

/// The tied copies among a chunk's `count` parameters, found by their global names
/// (`name(i)` → std::string, `span(i)` → the parameter's GradientSpan).
template <class Name, class Span>
std::vector<TiedGradient> find_tied_gradients(std::size_t count, Name name, Span span) {
  std::vector<TiedGradient> out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string& n = name(i);
    if (n == "wte.weight" || n == "lm_head.weight")
      out.push_back(TiedGradient{i, n == "lm_head.weight", span(i)});
  }
  return out;
}

/// Called with a bucket's index once its gradients are final (see above), on the thread
/// that runs the backward.
using BucketFinal = std::function<void(std::size_t bucket)>;

}  // namespace conveyor
