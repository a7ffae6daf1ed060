// The premise of shrinking replicas bitwise (actors/worker/share_gradients.hpp): one model
// that accumulates two configured replicas' micro-batches as two shares ends with the
// gradients that two replicas' Gloo average writes, bit for bit.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include "actors/job/replica_groups.hpp"
#include "actors/worker/replica_gradients.hpp"
#include "actors/worker/share_gradients.hpp"
#include "tests/actors/worker/worker_test_model.hpp"

using namespace conveyor;

namespace {

const GptConfig& kModel = testing::kWorkerModel;
const StageSlice& kWhole = testing::kWorkerWhole;
Tensor random_ids(std::uint32_t seed) { return testing::worker_random_ids(seed); }

// A micro-batch's forward and backward, its loss gradient scaled by `scale`.
void train_micro_batch(StageModel& model, std::uint32_t seed, float scale) {
  StageForward out = model.forward(random_ids(seed), random_ids(seed + 1000), true);
  (void)model.backward(*out.stash, Tensor{}, scale);
}

std::vector<float> flat_gradients(StageModel& model) {
  std::vector<float> out;
  for (Tensor& g : model.gradients()) {
    const auto v = g.f32_span();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr float kScale = 1.0f / 3.0f;  // a replica's 3 micro-batches: not a power of two
const std::uint32_t kSeeds[2][3] = {{11, 12, 13}, {21, 22, 23}};

}  // namespace

TEST_CASE("one model accumulating 2 shares ends with the gradients 2 replicas average through Gloo, bitwise") {
  // Two configured replicas, three micro-batches each, averaged by a real Gloo group.
  ReplicaGroups groups(2, std::chrono::milliseconds(10'000));
  std::vector<std::unique_ptr<StageModel>> replicas;
  for (int r = 0; r < 2; ++r) {
    replicas.push_back(make_cpu_stage_model(kModel, kWhole, 7));
    for (std::uint32_t seed : kSeeds[r]) train_micro_batch(*replicas[r], seed, kScale);
  }
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        StageModel* m = replicas[r].get();
        ReplicaGradients sync(groups.join(0, r, ReplicaGradients::layout_of({m}), Device::cpu()), {m});
        sync.arm(0);
        sync.after_last_backward(0);
        sync.finish();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  const auto averaged = flat_gradients(*replicas[0]);
  REQUIRE(same_bits(averaged, flat_gradients(*replicas[1])));

  // One replica running all six micro-batches in two shares.
  auto one = make_cpu_stage_model(kModel, kWhole, 7);
  ShareGradients shares(2, {one.get()});
  for (std::uint32_t seed : kSeeds[0]) train_micro_batch(*one, seed, kScale);
  shares.end_share(0);
  for (std::uint32_t seed : kSeeds[1]) train_micro_batch(*one, seed, kScale);
  shares.combine(0);
  CHECK(same_bits(flat_gradients(*one), averaged));

  // The same six in one sequence at the whole step's scale: the same sum, other bits.
  auto plain = make_cpu_stage_model(kModel, kWhole, 7);
  for (int r = 0; r < 2; ++r)
    for (std::uint32_t seed : kSeeds[r]) train_micro_batch(*plain, seed, 1.0f / 6.0f);
  CHECK_FALSE(same_bits(flat_gradients(*plain), averaged));
}

TEST_CASE("a share ends with the model's gradients zeroed, and combining early or twice is refused") {
  auto model = make_cpu_stage_model(kModel, kWhole, 7);
  ShareGradients shares(2, {model.get()});
  CHECK_THROWS_AS(shares.combine(0), std::logic_error);
  train_micro_batch(*model, 5, 1.0f);
  shares.end_share(0);
  for (float g : flat_gradients(*model)) REQUIRE(g == 0.0f);
  CHECK_THROWS_AS(shares.end_share(0), std::logic_error);  // 2 shares: one ends early
  shares.combine(0);
  CHECK_THROWS_AS(shares.combine(0), std::logic_error);
  shares.end_share(0);
  shares.clear();  // an aborted step
  CHECK_THROWS_AS(shares.combine(0), std::logic_error);
  CHECK_THROWS_AS(ShareGradients(1, {model.get()}), std::invalid_argument);
}
