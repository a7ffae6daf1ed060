// The fused backward's weight gradients on a stream of their own
// (kernels/cuda/model/weight_grad_stream.hpp): 1F1B's order of full backwards, nothing
// synchronised in between, gives the very gradients and updated weights of a zero-bubble
// order (split backward, W behind later forwards and input gradients, on the compute
// stream) run one action at a time with the device idle between actions; the zero-bubble
// order unsynchronised too. Every reader of the gradients (norms, the optimizer) sees all
// of them.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <vector>

#include "tests/kernels/cuda/cuda_stage_test_support.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

enum class Kind { F, I, W, B };
struct Step {
  Kind kind;
  int micro_batch;
};

// Runs `order` on `model` (one slice: the whole model) over `batches`; with `serial`, the
// host waits for the device after every action. Returns the gradients, then the weights
// after one AdamW step.
std::pair<std::vector<NamedTensor>, std::vector<NamedTensor>> run(
    StageModel& model, const std::vector<testing::Batch>& batches, const std::vector<Step>& order,
    bool serial) {
  std::vector<std::unique_ptr<StageStash>> stashes(batches.size());
  for (const Step& s : order) {
    const auto mb = static_cast<std::size_t>(s.micro_batch);
    switch (s.kind) {
      case Kind::F:
        stashes[mb] =
            model.forward(batches[mb].tokens, batches[mb].targets, /*keep_stash=*/true).stash;
        break;
      case Kind::I:
        (void)model.backward_input(*stashes[mb], Tensor{}, 0.25f);
        break;
      case Kind::W:
        model.backward_weight(*stashes[mb]);
        break;
      case Kind::B:
        (void)model.backward(*stashes[mb], Tensor{}, 0.25f);
        break;
    }
    if (serial) model.synchronize();
  }
  auto grads = cuda_stage_gradients(model);
  (void)model.grad_squares();
  model.optimizer_step(AdamWConfig{}, 1e-3, 1.0f);
  return {std::move(grads), model.weights()};
}

void check_same(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << a[i].name);
    CHECK(testing::bitwise_equal(a[i].tensor, b[i].tensor));
  }
}

TEST_CASE("weight gradients on their own stream: 1F1B and zero-bubble orders keep every bit") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  std::vector<testing::Batch> batches;
  for (int mb = 0; mb < 4; ++mb) batches.push_back(testing::random_batch(kB, kT, kConfig.vocab, 40 + mb));
  using K = Kind;
  // W of micro-batch m queued behind the forwards and input gradients of later ones.
  const std::vector<Step> zero_bubble = {
      {K::F, 0}, {K::F, 1}, {K::I, 0}, {K::F, 2}, {K::W, 0}, {K::I, 1}, {K::F, 3},
      {K::W, 1}, {K::I, 2}, {K::W, 2}, {K::I, 3}, {K::W, 3}};
  const std::vector<Step> one_f_one_b = {{K::F, 0}, {K::F, 1}, {K::B, 0}, {K::F, 2}, {K::B, 1},
                                         {K::F, 3}, {K::B, 2}, {K::B, 3}};
  for (bool grads_bf16 : {false, true}) {
    CAPTURE(grads_bf16);
    const CudaStageOptions options = on_device(0, /*master_fp32=*/true, grads_bf16);
    auto reference = make_cuda_stage_model(kConfig, kFull, kSeed, options);
    const auto [ref_grads, ref_weights] = run(*reference, batches, zero_bubble, /*serial=*/true);
    for (const auto* order : {&zero_bubble, &one_f_one_b}) {
      CAPTURE(order == &zero_bubble);
      auto model = make_cuda_stage_model(kConfig, kFull, kSeed, options);
      const auto [grads, weights] = run(*model, batches, *order, /*serial=*/false);
      check_same(ref_grads, grads);
      check_same(ref_weights, weights);
    }
  }
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
