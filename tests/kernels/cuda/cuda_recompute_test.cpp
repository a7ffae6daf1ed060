// model.recompute on the CUDA model: each block's backward computes again what its
// forward dropped, with the same kernels on the same input, so the loss, the input
// gradient handed upstream and every weight gradient are bitwise those of none — for the
// full backward (the embedding slice's block-by-block path) and for backward_input +
// backward_weight, f32 and bf16 gradients; and the stash is smaller.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <string>

#include "kernels/cuda/model/cuda_stage_model.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "tests/kernels/cuda/cuda_stage_test_support.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

GptConfig with(Recompute r) {
  GptConfig c = kConfig;
  c.recompute = r;
  return c;
}

struct Outcome {
  double loss = 0;
  std::size_t stash_after_forward = 0;  // both slices' stashes, bytes
  std::vector<NamedTensor> grads;       // host copies, both slices
};

// Two slices (embedding + block 0, block 1 + head) on cuda:0, one micro-batch.
Outcome run(Recompute r, bool split, bool grads_bf16) {
  const testing::Batch batch = testing::random_batch(kB, kT, kConfig.vocab, 21);
  auto first = make_cuda_stage_model(with(r), {0, 1, true, false}, kSeed,
                                     on_device(0, true, grads_bf16));
  auto last = make_cuda_stage_model(with(r), {1, 1, false, true}, kSeed,
                                    on_device(0, true, grads_bf16));
  Outcome o;
  StageForward f1 = first->forward(batch.tokens, batch.targets, /*keep_stash=*/true);
  StageForward f2 = last->forward(f1.activation, batch.targets, /*keep_stash=*/true);
  o.loss = f2.loss;
  o.stash_after_forward = f1.stash->bytes() + f2.stash->bytes();
  Tensor d;
  if (split) {
    d = last->backward_input(*f2.stash, Tensor{}, 0.5f);
    last->backward_weight(*f2.stash);
    (void)first->backward_input(*f1.stash, d, 0.5f);
    first->backward_weight(*f1.stash);
  } else {
    d = last->backward(*f2.stash, Tensor{}, 0.5f);
    (void)first->backward(*f1.stash, d, 0.5f);
  }
  first->synchronize();
  last->synchronize();
  o.grads = cuda_stage_gradients(*first);
  for (auto& g : cuda_stage_gradients(*last)) o.grads.push_back(g);
  return o;
}

TEST_CASE("cuda stage model: model.recompute attention and full change no bit and hold less") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  for (bool grads_bf16 : {false, true}) {
    for (bool split : {false, true}) {
      CAPTURE(grads_bf16);
      CAPTURE(split);
      const Outcome kept = run(Recompute::none, split, grads_bf16);
      std::size_t previous = kept.stash_after_forward;
      for (Recompute r : {Recompute::attention, Recompute::full}) {
        CAPTURE(std::string(recompute_name(r)));
        const Outcome again = run(r, split, grads_bf16);
        CHECK(again.loss == kept.loss);
        MESSAGE(recompute_name(r) << ": stashes after forward " << again.stash_after_forward
                                  << " B (none " << kept.stash_after_forward << " B)");
        CHECK(again.stash_after_forward < previous);
        previous = again.stash_after_forward;
        REQUIRE(again.grads.size() == kept.grads.size());
        for (std::size_t i = 0; i < kept.grads.size(); ++i) {
          CAPTURE(kept.grads[i].name);
          CHECK(testing::bitwise_equal(again.grads[i].tensor, kept.grads[i].tensor));
        }
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
#endif
