// The Gloo stage group: R ranks as threads of this process over real loopback TCP, their
// addresses found through a real rendezvous server. Averages are checked against a serial
// double-precision sum, across ranks bit for bit, and across two groups (two "runs").
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "tests/transport/collective/collective_test_support.hpp"
#include "transport/collective/collective_error.hpp"
#include "transport/collective/gloo/gloo_gradient_all_reduce.hpp"

namespace conveyor {
namespace {

using namespace collective_testing;
using namespace std::chrono_literals;

// Odd sizes: none a multiple of R or of Gloo's segments; bucket 2 is one buffer over
// Gloo's 1 MiB segment (reduced in place, several segments per rank); bucket 4 holds an
// empty buffer.
const std::vector<std::vector<std::size_t>> kBucketSizes = {
    {1, 3, 5}, {1023, 17}, {300007}, {7, 131, 4099}, {0, 2}};

GlooGroupOptions options(const std::string& name, int rank, int size, const BucketLayout& layout,
                         std::uint32_t generation = 0,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000)) {
  GlooGroupOptions o;
  o.group = {.name = name, .rank = rank, .size = size, .generation = generation};
  o.layout = layout;
  o.timeout = timeout;
  return o;
}

// Starts every bucket in order, then waits for them last to first: all are in flight at
// once, as when a stage starts each bucket as soon as its layers' backward is done.
void reduce_all(GradientAllReduce& group, HostBuckets& data) {
  std::vector<std::unique_ptr<AllReduceHandle>> pending;
  for (std::size_t b = 0; b < data.buffers.size(); ++b) pending.push_back(group.start(data.bucket(b)));
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) (*it)->wait();
  for (auto& p : pending) CHECK(p->done());
}

// Elements of `got` farther from the exact reduction of `inputs` than the rounding bound.
// For an average of R floats: R - 1 rounded additions, each off by at most 2^-24 of a
// partial sum no larger than Σ|x_r|, then a rounded division by R: together at most
// 2^-24 · Σ|x_r| (a sum: R - 1 of them, (R - 1) · 2^-24 · Σ|x_r|).
std::size_t count_beyond_bound(const std::vector<HostBuckets>& inputs, const HostBuckets& got,
                               Reduction reduction, double* worst_ratio) {
  const int R = static_cast<int>(inputs.size());
  const double unit = std::ldexp(1.0, -24);
  std::size_t bad = 0;
  for (std::size_t b = 0; b < got.buffers.size(); ++b)
    for (std::size_t i = 0; i < got.buffers[b].size(); ++i)
      for (std::size_t k = 0; k < got.buffers[b][i].size(); ++k) {
        double sum = 0, magnitude = 0;
        for (int r = 0; r < R; ++r) {
          sum += inputs[r].buffers[b][i][k];
          magnitude += std::fabs(inputs[r].buffers[b][i][k]);
        }
        const double exact = reduction == Reduction::average ? sum / R : sum;
        const double bound =
            (reduction == Reduction::average ? 1.0 : R - 1.0) * unit * magnitude * (1 + 1e-9);
        const double error = std::fabs(got.buffers[b][i][k] - exact);
        *worst_ratio = std::max(*worst_ratio, error / bound);
        if (error > bound) ++bad;
      }
  return bad;
}

bool bitwise_equal(const HostBuckets& a, const HostBuckets& b) {
  for (std::size_t i = 0; i < a.buffers.size(); ++i)
    for (std::size_t j = 0; j < a.buffers[i].size(); ++j)
      if (a.buffers[i][j].size() != b.buffers[i][j].size() ||
          std::memcmp(a.buffers[i][j].data(), b.buffers[i][j].data(),
                      a.buffers[i][j].size() * sizeof(float)) != 0)
        return false;
  return true;
}

// Two runs of the same step: generation 0, then a fresh group (generation 1) with the same
// inputs. With `shared_client` every rank uses one store client (as the stages of one
// process may).
void check_average_across(int R, bool shared_client) {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  std::unique_ptr<RendezvousClient> shared;
  if (shared_client) shared = std::make_unique<RendezvousClient>(testing::client_options(server));

  std::vector<HostBuckets> inputs;
  for (int r = 0; r < R; ++r) inputs.push_back(random_buckets(kBucketSizes, 17 * R + r + 1));
  const BucketLayout layout = inputs[0].layout();
  std::vector<std::vector<HostBuckets>> results(2, std::vector<HostBuckets>(R));

  run_ranks(R, [&](int rank) {
    std::unique_ptr<RendezvousClient> own;
    if (!shared_client) own = std::make_unique<RendezvousClient>(testing::client_options(server));
    RendezvousClient& store = shared_client ? *shared : *own;
    for (std::uint32_t run = 0; run < 2; ++run) {
      GlooGradientAllReduce group(store, options("stage 1", rank, R, layout, run));
      HostBuckets data = inputs[rank];
      reduce_all(group, data);
      results[run][rank] = std::move(data);
    }
  });

  for (int r = 0; r < R; ++r) {
    CAPTURE(r);
    double worst = 0;
    CHECK(count_beyond_bound(inputs, results[0][r], Reduction::average, &worst) == 0);
    MESSAGE("R=" << R << " rank " << r << ": worst error / bound = " << worst);
    CHECK(bitwise_equal(results[0][r], results[0][0]));  // every replica, the same bits
    CHECK(bitwise_equal(results[1][r], results[0][r]));  // every run, the same bits
  }
}

TEST_CASE("gloo averages buckets of odd sizes across 2 ranks, bitwise equal across ranks and runs") {
  check_average_across(2, false);
}

TEST_CASE("gloo averages buckets of odd sizes across 3 ranks, bitwise equal across ranks and runs") {
  check_average_across(3, false);
}

TEST_CASE("gloo averages across 4 ranks that share one store client, bitwise equal across ranks and runs") {
  check_average_across(4, true);
}

TEST_CASE("gloo with reduction sum leaves the plain sum of the ranks' buckets") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const std::vector<std::vector<std::size_t>> sizes = {{5, 1001}, {77}};
  std::vector<HostBuckets> inputs = {random_buckets(sizes, 1), random_buckets(sizes, 2),
                                     random_buckets(sizes, 3)};
  std::vector<HostBuckets> results(3);
  run_ranks(3, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    auto o = options("tied embeddings", rank, 3, inputs[0].layout());
    o.reduction = Reduction::sum;
    GlooGradientAllReduce group(store, o);
    results[rank] = inputs[rank];
    reduce_all(group, results[rank]);
  });
  double worst = 0;
  CHECK(count_beyond_bound(inputs, results[0], Reduction::sum, &worst) == 0);
  CHECK(bitwise_equal(results[1], results[0]));
  CHECK(bitwise_equal(results[2], results[0]));
}

TEST_CASE("a group of one connects nothing and leaves its buckets as they are") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient store(testing::client_options(server));
  HostBuckets data = random_buckets({{3, 4}, {9}}, 5);
  const HostBuckets before = data;
  GlooGradientAllReduce group(store, options("stage 0", 0, 1, data.layout()));
  reduce_all(group, data);
  CHECK(bitwise_equal(data, before));
}

TEST_CASE("a rank that never joins makes the others fail within the timeout, naming group and rank") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const BucketLayout layout = {{10, DType::f32}};
  std::vector<std::string> errors(2);
  std::vector<double> elapsed(2);
  run_ranks(2, [&](int rank) {  // ranks 0 and 1 of 3: rank 2 never comes
    RendezvousClient store(testing::client_options(server));
    const auto start = Clock::now();
    try {
      GlooGradientAllReduce group(store, options("stage 3", rank, 3, layout, 0, 1000ms));
    } catch (const CollectiveTimeout& e) {
      errors[rank] = e.what();
    }
    elapsed[rank] = seconds_since(start);
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(errors[r]);
    CHECK(errors[r].find("collective: group 'stage 3' (rank " + std::to_string(r) + " of 3)") == 0);
    CHECK(errors[r].find("rank 2 did not join within 1 s") != std::string::npos);
    CHECK(elapsed[r] >= 0.9);
    CHECK(elapsed[r] < 3.0);
  }
}

TEST_CASE("ranks that bucket differently are refused at construction, naming the bucket") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const std::vector<BucketLayout> layouts = {{{100, DType::f32}, {7, DType::f32}},
                                             {{100, DType::f32}, {8, DType::f32}}};
  std::vector<std::string> errors(2);
  const auto start = Clock::now();
  run_ranks(2, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    errors[rank] = error_of([&] {
      GlooGradientAllReduce group(store, options("stage 2", rank, 2, layouts[rank]));
    });
  });
  CHECK(seconds_since(start) < 5.0);  // found at once, not by a timeout (10 s)
  CAPTURE(errors[0]);
  CAPTURE(errors[1]);
  CHECK(errors[0].find("collective: group 'stage 2' (rank 0 of 2)") == 0);
  CHECK(errors[0].find("bucket 1 is f32x8 on rank 1 but f32x7 here") != std::string::npos);
  CHECK(errors[1].find("bucket 1 is f32x7 on rank 0 but f32x8 here") != std::string::npos);
}

TEST_CASE("ranks that start different buckets fail within the timeout instead of mixing them") {
  // Each bucket has its own Gloo tag, so bucket 0 of one rank never meets bucket 1 of
  // another (they differ in size: mixing them would end the process inside Gloo).
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  HostBuckets data[2] = {random_buckets({{100}, {7}}, 1), random_buckets({{100}, {7}}, 2)};
  std::vector<std::string> errors(2);
  std::vector<double> elapsed(2);
  run_ranks(2, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    GlooGradientAllReduce group(store, options("stage 6", rank, 2, data[0].layout(), 0, 1000ms));
    const auto start = Clock::now();
    try {
      group.start(data[rank].bucket(rank))->wait();  // rank 0: bucket 0, rank 1: bucket 1
    } catch (const CollectiveError& e) {
      errors[rank] = e.what();
    }
    elapsed[rank] = seconds_since(start);
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(errors[r]);
    CHECK(errors[r].find("collective: group 'stage 6' (rank " + std::to_string(r) + " of 2): bucket " +
                         std::to_string(r)) == 0);
    CHECK(elapsed[r] < 3.0);
  }
  CHECK((errors[0].find("Timed out") != std::string::npos ||
         errors[1].find("Timed out") != std::string::npos));
}

TEST_CASE("start refuses a bucket that does not match the layout, before anything is sent") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const std::vector<std::vector<std::size_t>> sizes = {{6, 5}};
  std::vector<HostBuckets> data = {random_buckets(sizes, 1), random_buckets(sizes, 2)};
  const HostBuckets rank0_before = data[0];
  run_ranks(2, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    GlooGradientAllReduce group(store, options("stage 4", rank, 2, data[0].layout()));
    if (rank == 0) {
      GradientBucket wrong = data[0].bucket(0);
      wrong.buffers.pop_back();
      CHECK_THROWS_WITH_AS(group.start(wrong), doctest::Contains("holds 6 elements, the layout says 11"),
                           std::invalid_argument);
      wrong = data[0].bucket(0);
      wrong.index = 3;
      CHECK_THROWS_WITH_AS(group.start(wrong), doctest::Contains("bucket 3 is not in the layout"),
                           std::invalid_argument);
      wrong = data[0].bucket(0);
      wrong.buffers[1].dtype = DType::bf16;
      CHECK_THROWS_WITH_AS(group.start(wrong), doctest::Contains("buffer 1 is bf16"),
                           std::invalid_argument);
      CHECK(bitwise_equal(data[0], rank0_before));  // nothing was reduced
      auto pending = group.start(data[0].bucket(0));
      // Rank 1 starts later: the bucket is still in flight here.
      CHECK_THROWS_AS(group.start(data[0].bucket(0)), std::logic_error);
      pending->wait();
    } else {
      std::this_thread::sleep_for(300ms);
      group.start(data[1].bucket(0))->wait();
    }
  });
  CHECK(bitwise_equal(data[0], data[1]));
  CHECK(!bitwise_equal(data[0], rank0_before));
}

TEST_CASE("a peer that leaves mid-step fails the others' bucket in time and breaks the group") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  HostBuckets shape = random_buckets({{4096}}, 1);
  std::vector<std::string> errors(2), later(2);
  std::vector<double> elapsed(2);
  run_ranks(3, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    GlooGradientAllReduce group(store, options("stage 5", rank, 3, shape.layout(), 0, 2000ms));
    if (rank == 2) {  // joins, then goes away without taking part in the bucket
      std::this_thread::sleep_for(200ms);
      return;
    }
    HostBuckets data = random_buckets({{4096}}, 10 + rank);
    const auto start = Clock::now();
    errors[rank] = error_of([&] { group.start(data.bucket(0))->wait(); });
    elapsed[rank] = seconds_since(start);
    later[rank] = error_of([&] { group.start(data.bucket(0)); });
  });
  for (int r = 0; r < 2; ++r) {
    CAPTURE(errors[r]);
    CAPTURE(later[r]);
    CHECK(errors[r].find("collective: group 'stage 5' (rank " + std::to_string(r) + " of 3): bucket 0") == 0);
    CHECK(errors[r].find("rebuild it") != std::string::npos);
    CHECK(elapsed[r] < 4.0);
    CHECK(later[r].find("not started") != std::string::npos);
  }
}

}  // namespace
}  // namespace conveyor
