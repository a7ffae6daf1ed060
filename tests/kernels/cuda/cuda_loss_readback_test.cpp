// The head's loss read back later (CudaStageOptions::defer_loss_readback,
// kernels/cuda/model/loss_readback.hpp): the same bits as the immediate read, the thread
// not stopped meanwhile, a read after the model is gone, and an immediate read once every
// slot is pending.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "tests/kernels/cuda/cuda_stage_test_support.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

TEST_CASE("cuda stage model's deferred loss readback gives the immediate read's bits") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  CudaStageOptions deferred = on_device(0);
  deferred.defer_loss_readback = true;
  auto now = make_cuda_stage_model(kConfig, kFull, kSeed, on_device(0));
  auto later = make_cuda_stage_model(kConfig, kFull, kSeed, deferred);

  std::vector<double> want;
  std::vector<std::function<double()>> pending;
  for (int mb = 0; mb < 3; ++mb) {
    const testing::Batch b = testing::random_batch(kB, kT, kConfig.vocab, 90 + mb);
    const StageForward a = now->forward(b.tokens, b.targets, /*keep_stash=*/false);
    CHECK(!a.pending_loss);
    want.push_back(a.loss);
    StageForward d = later->forward(b.tokens, b.targets, /*keep_stash=*/false);
    CHECK(std::isnan(d.loss));
    REQUIRE(d.pending_loss);
    pending.push_back(std::move(d.pending_loss));
  }
  // Read out of order, one of them after its model is gone.
  later.reset();
  for (int i = 2; i >= 0; --i) {
    CAPTURE(i);
    const double got = pending[static_cast<std::size_t>(i)]();
    CHECK(std::isfinite(got));
    CHECK(got == want[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("cuda stage model reads its loss at once when every deferred slot is pending") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  CudaStageOptions deferred = on_device(0);
  deferred.defer_loss_readback = true;
  auto model = make_cuda_stage_model(kConfig, kFull, kSeed, deferred);
  const testing::Batch b = testing::random_batch(kB, kT, kConfig.vocab, 95);
  std::vector<std::function<double()>> held;
  int immediate = 0;
  double first = 0.0;
  for (int i = 0; i < 300; ++i) {
    StageForward f = model->forward(b.tokens, b.targets, /*keep_stash=*/false);
    if (f.pending_loss) {
      held.push_back(std::move(f.pending_loss));
    } else {
      ++immediate;
      first = f.loss;
    }
  }
  CHECK(held.size() == 256);  // the pool's slots
  CHECK(immediate == 44);
  CHECK(first == held.front()());  // the same batch, the same weights: the same loss
  // Dropped unread, the slots are free again.
  held.clear();
  StageForward again = model->forward(b.tokens, b.targets, /*keep_stash=*/false);
  CHECK(again.pending_loss);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
