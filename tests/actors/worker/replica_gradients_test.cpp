// A stage's gradients averaged across its replicas (actors/worker/replica_gradients.hpp):
// buckets from the stage models, started as they become final, averaged in place through
// the process's replica groups (a Gloo group per pipeline stage over loopback), the same
// bits on every replica, with the cost of the step's reductions measured.
#include <doctest/doctest.h>

#include <barrier>

#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

#include "actors/job/replica_groups.hpp"
#include "actors/worker/replica_gradients.hpp"
#include "transport/collective/collective_error.hpp"
#include "tests/actors/worker/worker_test_model.hpp"

using namespace conveyor;

namespace {

const GptConfig& kModel = testing::kWorkerModel;
const StageSlice& kWhole = testing::kWorkerWhole;
Tensor random_ids(std::uint32_t seed) { return testing::worker_random_ids(seed); }

// One train micro-batch of replica-specific data through `model` (forward, backward).
void train_micro_batch(StageModel& model, std::uint32_t seed) {
  StageForward out = model.forward(random_ids(seed), random_ids(seed + 1000), true);
  (void)model.backward(*out.stash, Tensor{}, 1.0f);
}

std::vector<std::vector<float>> copy_gradients(StageModel& model) {
  std::vector<std::vector<float>> out;
  for (Tensor& g : model.gradients()) {
    const auto v = g.f32_span();
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

// Runs `body(replica)` for two replicas on threads of their own; returns their errors.
std::vector<std::string> on_two_replicas(const std::function<void(int)>& body) {
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// `join` on this rank, then waits until the other rank has joined too: a rank that fails
// right after joining destroys its group, and a peer still connecting would then fail to
// join (a different error from the one a test checks).
template <class Join>
auto together(std::barrier<>& joined, Join join) {
  try {
    auto group = join();
    joined.arrive_and_wait();
    return group;
  } catch (...) {
    joined.arrive_and_drop();
    throw;
  }
}

}  // namespace

TEST_CASE("a CPU chunk is one f32 bucket of all its parameters, chunks follow each other") {
  auto first = make_cpu_stage_model(kModel, StageSlice{0, 1, true, false}, 7);
  auto second = make_cpu_stage_model(kModel, StageSlice{1, 1, false, true}, 7);
  const auto layout = ReplicaGradients::layout_of({first.get(), second.get()});
  REQUIRE(layout.size() == 2);
  auto elements = [](StageModel& m) {
    std::size_t n = 0;
    for (Tensor& g : m.gradients()) n += static_cast<std::size_t>(g.numel());
    return n;
  };
  CHECK(layout[0] == BucketShape{elements(*first), DType::f32});
  CHECK(layout[1] == BucketShape{elements(*second), DType::f32});
}

TEST_CASE("two replicas average their real gradients in place, bitwise equal, and time it") {
  ReplicaGroups groups(2, std::chrono::milliseconds(10'000));
  std::vector<std::unique_ptr<StageModel>> models;
  std::vector<std::vector<std::vector<float>>> before;
  for (int r = 0; r < 2; ++r) {
    models.push_back(make_cpu_stage_model(kModel, kWhole, 7));
    train_micro_batch(*models[r], 11 + 17 * r);  // each replica its own data
    before.push_back(copy_gradients(*models[r]));
  }
  REQUIRE(before[0] != before[1]);
  std::vector<ReductionTiming> timing(2);
  const auto errors = on_two_replicas([&](int r) {
    StageModel* model = models[r].get();
    ReplicaGradients sync(
        groups.join(0, r, ReplicaGradients::layout_of({model}), Device::cpu()), {model});
    sync.arm(0);
    sync.after_last_backward(0);  // a CPU model names no bucket: all start here
    timing[r] = sync.finish();
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    REQUIRE(errors[r].empty());
    CHECK(timing[r].busy_ms > 0.0);
    CHECK(timing[r].exposed_ms >= 0.0);
    const auto after = copy_gradients(*models[r]);
    for (std::size_t p = 0; p < after.size(); ++p)
      for (std::size_t i = 0; i < after[p].size(); ++i)
        CHECK(after[p][i] == (before[0][p][i] + before[1][p][i]) / 2);
  }
  CHECK(copy_gradients(*models[0]) == copy_gradients(*models[1]));
}

TEST_CASE("a step whose buckets were not all started fails naming the bucket, before any wait") {
  ReplicaGroups groups(2, std::chrono::milliseconds(10'000));
  std::barrier joined(2);
  const auto errors = on_two_replicas([&](int r) {
    auto model = make_cpu_stage_model(kModel, kWhole, 7);
    ReplicaGradients sync(together(joined, [&] {
                            return groups.join(1, r, ReplicaGradients::layout_of({model.get()}),
                                               Device::cpu());
                          }),
                          {model.get()});
    (void)sync.finish();
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.find("bucket 0 was not started this step") != std::string::npos);
  }
}

TEST_CASE("a host group refuses to wait for a CUDA stream") {
  ReplicaGroups groups(2, std::chrono::milliseconds(10'000));
  std::barrier joined(2);
  const auto errors = on_two_replicas([&](int r) {
    auto group =
        together(joined, [&] {
          return groups.join(2, r, {BucketShape{4, DType::f32}}, Device::cpu());
        });
    float values[4] = {1, 2, 3, 4};
    int stream = 0;  // any non-null pointer stands for a stream here
    (void)group->start_after(GradientBucket{0, {GradientBuffer{values, 4, DType::f32}}}, &stream);
  });
  for (const auto& e : errors) CHECK(e.find("cannot wait for a CUDA stream") != std::string::npos);
}

TEST_CASE("a replica that leaves its group releases a peer waiting in a bucket at once, and the next generation averages again") {
  // What a recovery relies on: a stage that leaves (or dies) closes its connections, so a
  // replica blocked in finish() fails long before the group's 10 s timeout; then both
  // join generation 1 and average as before.
  ReplicaGroups groups(2, std::chrono::milliseconds(10'000));
  std::vector<std::unique_ptr<StageModel>> models;
  for (int r = 0; r < 2; ++r) {
    models.push_back(make_cpu_stage_model(kModel, kWhole, 7));
    train_micro_batch(*models[r], 11 + 17 * r);
  }
  double waited_ms = 0;
  const auto errors = on_two_replicas([&](int r) {
    StageModel* model = models[r].get();
    auto sync = std::make_unique<ReplicaGradients>(
        groups.join(3, r, ReplicaGradients::layout_of({model}), Device::cpu(), 0),
        std::vector<StageModel*>{model});
    if (r == 1) {  // idle for this step, then leaves the group
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      sync.reset();
      return;
    }
    sync->arm(0);
    sync->after_last_backward(0);
    const auto began = std::chrono::steady_clock::now();
    try {
      (void)sync->finish();
    } catch (const CollectiveError&) {
      waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            began).count();
      throw;
    }
  });
  CHECK(errors[0].find("collective: group 'stage 3' (rank 0 of 2)") != std::string::npos);
  CHECK(errors[1].empty());
  CHECK(waited_ms < 5'000.0);
  MESSAGE("the waiting replica failed after " << waited_ms << " ms (group timeout 10 s)");

  // The next generation: fresh connections, the same average on both replicas.
  for (int r = 0; r < 2; ++r) models[r]->discard_gradients();
  for (int r = 0; r < 2; ++r) train_micro_batch(*models[r], 11 + 17 * r);
  const auto again = on_two_replicas([&](int r) {
    StageModel* model = models[r].get();
    ReplicaGradients sync(
        groups.join(3, r, ReplicaGradients::layout_of({model}), Device::cpu(), 1), {model});
    sync.arm(0);
    sync.after_last_backward(0);
    (void)sync.finish();
  });
  CHECK(again[0].empty());
  CHECK(again[1].empty());
  CHECK(copy_gradients(*models[0]) == copy_gradients(*models[1]));
}
