// The premise of shrinking replicas bitwise (actors/worker/share_gradients.hpp): one model
// that accumulates R configured replicas' micro-batches as R shares ends with the
// gradients that R replicas' Gloo average writes, bit for bit (R = 2, 3, 4).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

#include "actors/job/replica_groups.hpp"
#include "actors/plan/replica_placement.hpp"
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
std::uint32_t seed_of(int replica, int micro_batch) { return static_cast<std::uint32_t>(11 + 10 * replica + micro_batch); }

// `rank(r, model r)` on a thread per rank (the ranks of one group join at once); then the
// gradients every model ends with, the same bits on each (checked).
std::vector<float> on_ranks(const std::vector<std::unique_ptr<StageModel>>& models,
                            const std::function<void(int, StageModel*)>& rank) {
  std::vector<std::string> errors(models.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < models.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        rank(static_cast<int>(r), models[r].get());
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  const auto out = flat_gradients(*models[0]);
  for (std::size_t r = 1; r < models.size(); ++r) REQUIRE(same_bits(out, flat_gradients(*models[r])));
  return out;
}

// `replicas` configured replicas, three micro-batches each, averaged by a real Gloo group:
// the gradients every replica ends with (the same bits on each, checked).
std::vector<float> group_average(int replicas) {
  ReplicaGroups groups(replicas, std::chrono::milliseconds(10'000));
  std::vector<std::unique_ptr<StageModel>> models;
  for (int r = 0; r < replicas; ++r) {
    models.push_back(make_cpu_stage_model(kModel, kWhole, 7));
    for (int mb = 0; mb < 3; ++mb) train_micro_batch(*models.back(), seed_of(r, mb), kScale);
  }
  return on_ranks(models, [&](int r, StageModel* m) {
    ReplicaGradients sync(groups.join(0, r, ReplicaGradients::layout_of({m}), Device::cpu()), {m});
    sync.arm(0);
    sync.after_last_backward(0);
    sync.finish();
  });
}

// One model running the `replicas` replicas' micro-batches as as many shares.
std::vector<float> one_replica_of_shares(int replicas) {
  auto one = make_cpu_stage_model(kModel, kWhole, 7);
  ShareGradients shares(replicas, {one.get()});
  for (int r = 0; r < replicas; ++r) {
    for (int mb = 0; mb < 3; ++mb) train_micro_batch(*one, seed_of(r, mb), kScale);
    if (r + 1 < replicas) shares.end_share(0);
  }
  shares.combine(0);
  return flat_gradients(*one);
}

// `running` models (a real Gloo group of that many) standing for `configured` replicas,
// model r running configured_shares' of them as shares, gathered and combined; the
// gradients every model ends with (the same bits on each, checked).
std::vector<float> replicas_of_gathered_shares(int configured, int running) {
  ReplicaGroups groups(running, std::chrono::milliseconds(10'000));
  std::vector<int> replica_shares;
  for (int r = 0; r < running; ++r) replica_shares.push_back(configured_shares(configured, running, r).count);
  std::vector<std::unique_ptr<StageModel>> models;
  for (int r = 0; r < running; ++r) models.push_back(make_cpu_stage_model(kModel, kWhole, 7));
  return on_ranks(models, [&](int r, StageModel* m) {
    const ConfiguredShares mine = configured_shares(configured, running, r);
    ShareGradients shares(mine.count, {m});
    for (int c = mine.first; c < mine.first + mine.count; ++c) {
      for (int mb = 0; mb < 3; ++mb) train_micro_batch(*m, seed_of(c, mb), kScale);
      if (c + 1 < mine.first + mine.count) shares.end_share(0);
    }
    ReplicaGradients sync(groups.join(0, r, ReplicaGradients::layout_of({m}), Device::cpu()), {m});
    shares.gather_and_combine(0, sync.group(), replica_shares);
  });
}

}  // namespace

TEST_CASE("2 replicas standing for 3 (shares 2 and 1), and 3 for 4, gather their shares and end with the configured group's average, bitwise") {
  CHECK(same_bits(replicas_of_gathered_shares(3, 2), group_average(3)));
  CHECK(same_bits(replicas_of_gathered_shares(4, 3), group_average(4)));
  CHECK(same_bits(replicas_of_gathered_shares(4, 2), group_average(4)));
}

TEST_CASE("one model accumulating 2 shares ends with the gradients 2 replicas average through Gloo, bitwise") {
  const auto averaged = group_average(2);
  CHECK(same_bits(one_replica_of_shares(2), averaged));

  // The same six in one sequence at the whole step's scale: the same sum, other bits.
  auto plain = make_cpu_stage_model(kModel, kWhole, 7);
  for (int r = 0; r < 2; ++r)
    for (int mb = 0; mb < 3; ++mb) train_micro_batch(*plain, seed_of(r, mb), 1.0f / 6.0f);
  CHECK_FALSE(same_bits(flat_gradients(*plain), averaged));
}

TEST_CASE("3 and 4 shares combined in Gloo's ring order end with the gradients 3 and 4 replicas average, bitwise") {
  for (int replicas : {3, 4}) {
    CAPTURE(replicas);
    const auto averaged = group_average(replicas);
    const auto combined = one_replica_of_shares(replicas);
    CHECK(same_bits(combined, averaged));
    // Adding the shares left to right, as this did before the ring order, misses.
    std::vector<std::vector<float>> each;
    for (int r = 0; r < replicas; ++r) {
      auto m = make_cpu_stage_model(kModel, kWhole, 7);
      for (int mb = 0; mb < 3; ++mb) train_micro_batch(*m, seed_of(r, mb), kScale);
      each.push_back(flat_gradients(*m));
    }
    std::vector<float> left_to_right(each[0].size());
    for (std::size_t i = 0; i < left_to_right.size(); ++i) {
      float sum = each[0][i];
      for (int r = 1; r < replicas; ++r) sum += each[static_cast<std::size_t>(r)][i];
      left_to_right[i] = sum / static_cast<float>(replicas);
    }
    CHECK_FALSE(same_bits(left_to_right, averaged));
  }
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
  CHECK_THROWS_AS(ShareGradients(0, {model.get()}), std::invalid_argument);
}

// The cost of the gathered combine on a ~25 M-parameter CPU model (8 layers, d_model 512),
// for docs/RELIABILITY.md: run with --no-skip -tc="timing*". Ranks are threads of this
// process over loopback Gloo, so they share its cores.
TEST_CASE("timing: gathered shares on a 25 M-parameter model against the configured group's average" * doctest::skip()) {
  const GptConfig big{8, 512, 8, 64, 256};
  const StageSlice whole{0, 8, true, true};
  const auto ids = [&](std::uint32_t seed) {
    Tensor t = Tensor::zeros(Shape{1, big.seq_len}, DType::i32);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> id(0, static_cast<int>(big.vocab) - 1);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = id(rng);
    return t;
  };
  const auto train = [&](StageModel& m, std::uint32_t seed) {
    StageForward out = m.forward(ids(seed), ids(seed + 1000), true);
    (void)m.backward(*out.stash, Tensor{}, 0.5f);
  };
  // `running` ranks standing for `configured` (running == configured: the group's average).
  const auto time_ranks = [&](int configured, int running) {
    ReplicaGroups groups(running, std::chrono::milliseconds(120'000));
    std::vector<std::unique_ptr<StageModel>> models;
    for (int r = 0; r < running; ++r) models.push_back(make_cpu_stage_model(big, whole, 7));
    std::vector<int> replica_shares;
    for (int r = 0; r < running; ++r) replica_shares.push_back(configured_shares(configured, running, r).count);
    std::vector<double> ms(static_cast<std::size_t>(running));
    std::vector<std::thread> threads;
    for (int r = 0; r < running; ++r)
      threads.emplace_back([&, r] {
        StageModel* m = models[static_cast<std::size_t>(r)].get();
        const ConfiguredShares mine = configured_shares(configured, running, r);
        ShareGradients shares(mine.count, {m});
        ReplicaGradients sync(groups.join(0, r, ReplicaGradients::layout_of({m}), Device::cpu()), {m});
        for (int step = 0; step < 2; ++step) {  // the second step's time: buffers in place
          m->discard_gradients();
          for (int c = mine.first; c < mine.first + mine.count; ++c) {
            train(*m, static_cast<std::uint32_t>(c));
            if (c + 1 < mine.first + mine.count) shares.end_share(0);
          }
          const auto began = std::chrono::steady_clock::now();
          if (running == configured) {
            sync.arm(0);
            sync.after_last_backward(0);
            sync.finish();
          } else {
            shares.gather_and_combine(0, sync.group(), replica_shares);
          }
          ms[static_cast<std::size_t>(r)] =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
        }
      });
    for (auto& t : threads) t.join();
    std::int64_t params = 0;
    for (Tensor& g : models[0]->gradients()) params += g.numel();
    MESSAGE(running << " rank(s) standing for " << configured << " (" << params << " parameters): "
                    << *std::max_element(ms.begin(), ms.end()) << " ms (slowest rank, second step)");
  };
  // One replica of 3 shares, combined locally (no group), as the docs measured before.
  {
    auto one = make_cpu_stage_model(big, whole, 7);
    ShareGradients shares(3, {one.get()});
    for (int c = 0; c < 3; ++c) {
      train(*one, static_cast<std::uint32_t>(c));
      if (c < 2) shares.end_share(0);
    }
    const auto began = std::chrono::steady_clock::now();
    shares.combine(0);
    MESSAGE("1 replica standing for 3, combined locally: "
            << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count() << " ms");
  }
  for (int repeat = 0; repeat < 2; ++repeat) {
    time_ranks(3, 3);
    time_ranks(3, 2);
    time_ranks(4, 4);
    time_ranks(4, 3);
    time_ranks(4, 2);
  }
}
