// Cancelling a Gloo stage group's generation (group_cancellation.hpp): 2 ranks as threads
// over real loopback TCP. A peer that joined and then never starts its bucket stands for a
// frozen replica (SIGSTOP): its connections stay open, so nothing fails by itself before
// the bucket's timeout (30 s here); the cancellation must end the wait at once.
#include <doctest/doctest.h>

#include <future>
#include <memory>
#include <string>

#include "tests/transport/collective/collective_test_support.hpp"
#include "transport/collective/collective_error.hpp"
#include "transport/collective/gloo/gloo_gradient_all_reduce.hpp"

namespace conveyor {
namespace {

using namespace collective_testing;
using namespace std::chrono_literals;

constexpr std::uint32_t kGeneration = 3;

GlooGroupOptions options(int rank, const BucketLayout& layout, const GroupCancellation& cancellation,
                         std::uint32_t generation = kGeneration) {
  GlooGroupOptions o;
  o.group = {.name = "stage 2", .rank = rank, .size = 2, .generation = generation};
  o.layout = layout;
  o.timeout = 30'000ms;
  o.cancellation = &cancellation;
  return o;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Rank 1 joins and stays, never starting a bucket, until rank 0 is done with `rank0`.
template <class F>
void with_frozen_peer(const BucketLayout& layout, const GroupCancellation& cancellation, F rank0) {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  std::promise<void> rank0_done;
  std::shared_future<void> released = rank0_done.get_future().share();
  run_ranks(2, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    auto group = std::make_unique<GlooGradientAllReduce>(store, options(rank, layout, cancellation));
    if (rank == 1) {
      released.wait();
      return;
    }
    try {
      rank0(group);
    } catch (...) {
      rank0_done.set_value();
      throw;
    }
    rank0_done.set_value();
  });
}

TEST_CASE("a cancelled generation ends a bucket waiting for a frozen peer at once, naming group and bucket") {
  GroupCancellation cancellation;
  HostBuckets data = random_buckets({{4096, 5}, {300}}, 1);
  std::string error, queued_error, later;
  double waited = 0, destroyed_in = 0;
  with_frozen_peer(data.layout(), cancellation, [&](std::unique_ptr<GlooGradientAllReduce>& group) {
    auto running = group->start(data.bucket(0));
    auto queued = group->start(data.bucket(1));
    std::this_thread::sleep_for(275ms);  // bucket 0 is waiting inside gloo::allreduce
    const auto cancelled_at = Clock::now();
    cancellation.cancel_below(kGeneration + 1);  // a recovery began
    error = error_of([&] { running->wait(); });
    waited = seconds_since(cancelled_at);
    queued_error = error_of([&] { queued->wait(); });
    later = error_of([&] { group->start(data.bucket(0)); });
    const auto destroying = Clock::now();
    group.reset();
    destroyed_in = seconds_since(destroying);
  });
  CAPTURE(error);
  CAPTURE(queued_error);
  CAPTURE(later);
  CHECK(waited < 2.0);  // not the 30 s timeout
  MESSAGE("bucket 0 failed " << waited * 1000 << " ms after the cancellation");
  CHECK(error.find("collective: group 'stage 2' (rank 0 of 2): bucket 0 (4101 f32)") == 0);
  CHECK(contains(error, "cancelled: a recovery began"));
  CHECK(contains(error, "rebuild it"));
  CHECK(queued_error.find("collective: group 'stage 2' (rank 0 of 2): bucket 1") == 0);
  CHECK(contains(queued_error, "not run"));
  CHECK(contains(queued_error, "cancelled"));
  CHECK(contains(later, "not started"));
  CHECK(destroyed_in < 1.0);
}

TEST_CASE("a group destroyed just after its generation is cancelled does not wait for its bucket") {
  GroupCancellation cancellation;
  HostBuckets data = random_buckets({{1000}}, 2);
  std::string error;
  double destroyed_in = 0;
  with_frozen_peer(data.layout(), cancellation, [&](std::unique_ptr<GlooGradientAllReduce>& group) {
    auto running = group->start(data.bucket(0));
    std::this_thread::sleep_for(200ms);
    const auto cancelled_at = Clock::now();
    cancellation.cancel_below(kGeneration + 1);
    group.reset();  // the stage leaves its group as the recovery begins
    destroyed_in = seconds_since(cancelled_at);
    error = error_of([&] { running->wait(); });
  });
  CAPTURE(error);
  CHECK(destroyed_in < 2.0);
  CHECK(contains(error, "bucket 0"));
  CHECK(contains(error, "cancelled: a recovery began"));
}

TEST_CASE("a cancelled generation ends an all-gather waiting for a frozen peer at once") {
  GroupCancellation cancellation;
  HostBuckets params = random_buckets({{64, 36}}, 3);
  std::string error, later;
  double waited = 0;
  with_frozen_peer(params.layout(), cancellation, [&](std::unique_ptr<GlooGradientAllReduce>& group) {
    std::thread canceller([&] {
      std::this_thread::sleep_for(300ms);
      cancellation.cancel_below(kGeneration + 1);
    });
    const auto began = Clock::now();
    error = error_of([&] { group->all_gather(params.bucket(0).buffers, {50, 50}); });
    waited = seconds_since(began);
    canceller.join();
    later = error_of([&] { group->start(params.bucket(0)); });
  });
  CAPTURE(error);
  CAPTURE(later);
  CHECK(waited < 2.3);  // 0.3 s before the cancellation, then at once
  CHECK(error.find("collective: group 'stage 2' (rank 0 of 2): all-gather of 100 f32") == 0);
  CHECK(contains(error, "cancelled: a recovery began"));
  CHECK(contains(later, "not started"));
}

TEST_CASE("a cancellation while nothing is in flight makes the next start fail at once") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  GroupCancellation cancellation;
  std::vector<std::string> errors(2);
  std::vector<double> took(2);
  std::promise<void> first_done[2];
  std::shared_future<void> both_done[2] = {first_done[0].get_future().share(),
                                           first_done[1].get_future().share()};
  run_ranks(2, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    HostBuckets data = random_buckets({{100}}, 4 + rank);
    GlooGradientAllReduce group(store, options(rank, data.layout(), cancellation));
    group.start(data.bucket(0))->wait();  // the group works
    first_done[rank].set_value();
    both_done[0].wait();
    both_done[1].wait();
    if (rank == 0) cancellation.cancel_below(kGeneration + 1);
    else std::this_thread::sleep_for(100ms);
    const auto began = Clock::now();
    errors[rank] = error_of([&] { group.start(data.bucket(0))->wait(); });
    took[rank] = seconds_since(began);
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(errors[r]);
    CHECK(errors[r].find("collective: group 'stage 2' (rank " + std::to_string(r) +
                         " of 2): bucket 0") == 0);
    CHECK(contains(errors[r], "not started"));
    CHECK(contains(errors[r], "cancelled: a recovery began"));
    CHECK(took[r] < 0.5);
  }
}

TEST_CASE("cancelling older generations leaves a group of a later generation working") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  GroupCancellation cancellation;
  cancellation.cancel_below(kGeneration);  // the recovery that made generation 3
  std::vector<HostBuckets> inputs = {random_buckets({{4096}, {7}}, 6), random_buckets({{4096}, {7}}, 7)};
  std::vector<HostBuckets> results = inputs;
  run_ranks(2, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    GlooGradientAllReduce group(store, options(rank, inputs[0].layout(), cancellation));
    auto first = group.start(results[rank].bucket(0));
    cancellation.cancel_below(kGeneration - 1);  // a late, older request changes nothing
    first->wait();
    group.start(results[rank].bucket(1))->wait();
  });
  for (std::size_t b = 0; b < 2; ++b) {
    CAPTURE(b);
    CHECK(results[0].buffers[b] == results[1].buffers[b]);
    CHECK(results[0].buffers[b] != inputs[0].buffers[b]);  // reduced
  }
  CHECK(results[0].buffers[1][0][0] ==
        (inputs[0].buffers[1][0][0] + inputs[1].buffers[1][0][0]) / 2);
}

}  // namespace
}  // namespace conveyor
