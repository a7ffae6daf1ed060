#pragma once
// model.tie_embeddings (issue 9, item 6): the token embedding (first model stage) and the
// LM head (last model stage) share one weight. Each of the two holders keeps a copy,
// initialised alike (kernels/model/gpt_stage.cpp); after every step's backward — and after
// the replica averaging — both copies' gradients become their sum: through a 2-rank sum
// group between the two stage actors (Gloo on CPUs, NCCL on GPUs), or in place when one
// stage actor holds both copies (one pipeline stage, or a V-shaped schedule's first rank).
// The AdamW steps then keep the copies bitwise equal (the same values, gradients, moments
// and hyperparameters: the head copy takes wte's no-decay flag).
//
// What must hold: fl(a + b) is computed once per element, the same on every path (the
// group of two adds the two inputs once, like the in-place kernel), so the weights do not
// depend on how the model is split. The gradient norm counts the tied tensor once: the
// holder of the head copy leaves its square out (head_square_params()).
// CAF-free; one thread (the stage's).
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/model/stage_model.hpp"
#include "transport/collective/gradient_all_reduce.hpp"

namespace conveyor {

class TiedEmbeddings {
 public:
  /// The stage's chunks (in order; they outlive this object) and, when it holds exactly
  /// one copy, the sum group shared with the other holder. Throws std::invalid_argument
  /// when the chunks hold no copy, or one copy without a group, or both with one.
  TiedEmbeddings(std::vector<StageModel*> chunks, std::unique_ptr<GradientAllReduce> group);

  /// True when `chunks` hold exactly one copy (a sum group is needed).
  static bool needs_group(const std::vector<StageModel*>& chunks);
  /// The sum group's layout: the tied tensor's gradient, one bucket.
  static BucketLayout layout_of(const std::vector<StageModel*>& chunks);

  /// Both copies' gradients become their sum. Throws CollectiveError when the group fails.
  void sum();
  /// (chunk, parameter) of the head copy held here, if any: left out of the norm.
  std::vector<std::pair<std::size_t, std::size_t>> head_square_params() const;

 private:
  struct Copy {
    std::size_t chunk;
    TiedGradient gradient;
  };
  static std::vector<Copy> copies_of(const std::vector<StageModel*>& chunks);

  std::vector<StageModel*> chunks_;
  std::vector<Copy> copies_;
  std::unique_ptr<GradientAllReduce> group_;
};

}  // namespace conveyor
