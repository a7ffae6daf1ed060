// The NCCL stage group on two GPUs of this process (one thread per GPU stands for one
// replica's process; the unique id travels through a real rendezvous server): random f32
// and bf16 buckets of odd sizes are averaged within rounding of a host reference, bit for
// bit the same on both ranks and in two runs; a bucket only one rank starts fails its wait
// within the timeout. Needs two GPUs; prints why it skipped otherwise.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "kernels/tensor/bf16.hpp"
#include "kernels/cuda/check.hpp"
#include "tests/transport/collective/collective_test_support.hpp"
#include "tests/transport/nccl/nccl_test_support.hpp"
#include "transport/collective/collective_error.hpp"
#include "transport/collective/nccl/nccl_gradient_all_reduce.hpp"

namespace conveyor {
namespace {

using namespace std::chrono_literals;
using collective_testing::Clock;
using collective_testing::error_of;
using collective_testing::random_gradient;
using collective_testing::seconds_since;
using nccl_testing::DeviceStream;

struct BucketSpec {
  DType dtype;
  std::vector<std::size_t> buffers;
};

// Odd sizes, both dtypes; bucket 2 is large enough for NCCL to split it over several
// channels and steps.
const std::vector<BucketSpec> kBuckets = {{DType::f32, {1, 1023, 4099}},
                                          {DType::bf16, {7, 131}},
                                          {DType::f32, {(1 << 21) + 3}},
                                          {DType::bf16, {3 * 1021 * 5, 17}}};

BucketLayout layout_of(const std::vector<BucketSpec>& specs) {
  BucketLayout out;
  for (const auto& s : specs) {
    std::size_t n = 0;
    for (auto c : s.buffers) n += c;
    out.push_back({n, s.dtype});
  }
  return out;
}

// values[bucket][buffer]: as floats; bf16 buffers hold values bf16 can represent.
using Values = std::vector<std::vector<std::vector<float>>>;

Values random_values(int rank) {
  Values out;
  for (std::size_t b = 0; b < kBuckets.size(); ++b) {
    out.emplace_back();
    for (std::size_t i = 0; i < kBuckets[b].buffers.size(); ++i) {
      auto v = random_gradient(kBuckets[b].buffers[i], 1000 * rank + 10 * b + i + 1);
      if (kBuckets[b].dtype == DType::bf16)
        for (auto& x : v) x = round_to_bf16(x);
      out.back().push_back(std::move(v));
    }
  }
  return out;
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DType dtype) {
  std::vector<std::uint8_t> bytes(v.size() * dtype_size(dtype));
  if (dtype == DType::f32) {
    std::memcpy(bytes.data(), v.data(), bytes.size());
  } else {
    const auto bits = to_bf16_bits(v);
    std::memcpy(bytes.data(), bits.data(), bytes.size());
  }
  return bytes;
}

std::vector<float> decode(const std::vector<std::uint8_t>& bytes, DType dtype) {
  if (dtype == DType::f32) {
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  std::vector<std::uint16_t> bits(bytes.size() / 2);
  std::memcpy(bits.data(), bytes.data(), bytes.size());
  return from_bf16_bits(bits);
}

// One rank: uploads its values, averages every bucket (all in flight at once, waited
// last to first) and returns the device bytes of each buffer.
std::vector<std::vector<std::vector<std::uint8_t>>> average_on_gpu(RendezvousClient& store,
                                                                    int rank, std::uint32_t run,
                                                                    const Values& values) {
  DeviceStream stream(rank);
  std::vector<std::vector<Tensor>> tensors;
  for (std::size_t b = 0; b < kBuckets.size(); ++b) {
    tensors.emplace_back();
    for (std::size_t i = 0; i < kBuckets[b].buffers.size(); ++i) {
      const auto n = static_cast<std::int64_t>(kBuckets[b].buffers[i]);
      tensors.back().push_back(nccl_testing::upload(encode(values[b][i], kBuckets[b].dtype),
                                                    Shape{n}, kBuckets[b].dtype, rank, stream));
    }
  }
  NcclGroupOptions o;
  o.group = {.name = "stage 1", .rank = rank, .size = 2, .generation = run};
  o.layout = layout_of(kBuckets);
  o.device = rank;
  o.stream = stream;
  o.timeout = 30s;
  NcclGradientAllReduce group(store, o);
  std::vector<std::unique_ptr<AllReduceHandle>> pending;
  for (std::size_t b = 0; b < kBuckets.size(); ++b) {
    GradientBucket bucket{.index = b, .buffers = {}};
    for (auto& t : tensors[b])
      bucket.buffers.push_back({t.raw(), static_cast<std::size_t>(t.numel()), t.dtype()});
    pending.push_back(group.start(bucket));
  }
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) (*it)->wait();
  std::vector<std::vector<std::vector<std::uint8_t>>> out;
  for (auto& bucket : tensors) {
    out.emplace_back();
    for (auto& t : bucket) out.back().push_back(nccl_testing::download(t, stream));
  }
  return out;
}

TEST_CASE("gpu: nccl averages random bf16 and fp32 buckets of 2 GPUs within rounding, bitwise equal across ranks and runs") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const Values inputs[2] = {random_values(0), random_values(1)};
  std::vector<std::vector<std::vector<std::uint8_t>>> results[2][2];  // [run][rank]
  for (std::uint32_t run = 0; run < 2; ++run)
    nccl_testing::run_ranks(
        [&] {
          RendezvousClient store(testing::client_options(server));
          results[run][0] = average_on_gpu(store, 0, run, inputs[0]);
        },
        [&] {
          RendezvousClient store(testing::client_options(server));
          results[run][1] = average_on_gpu(store, 1, run, inputs[1]);
        });

  // Bounds: ncclAvg scales each input by 1/2 (exact) and sums once, rounded to the
  // buffer's type: at most half a unit in the last place of |average| ≤ Σ|x_r| / 2.
  for (std::size_t b = 0; b < kBuckets.size(); ++b)
    for (std::size_t i = 0; i < kBuckets[b].buffers.size(); ++i) {
      CAPTURE(b);
      CAPTURE(i);
      const DType dtype = kBuckets[b].dtype;
      const double unit = std::ldexp(1.0, dtype == DType::f32 ? -24 : -8);
      const auto got = decode(results[0][0][b][i], dtype);
      std::size_t bad = 0;
      for (std::size_t k = 0; k < got.size(); ++k) {
        const double x0 = inputs[0][b][i][k], x1 = inputs[1][b][i][k];
        const double bound = unit * (std::fabs(x0) + std::fabs(x1)) / 2 * (1 + 1e-9);
        if (std::fabs(got[k] - (x0 + x1) / 2) > bound) ++bad;
      }
      CHECK(bad == 0);
      CHECK(results[0][1][b][i] == results[0][0][b][i]);  // both replicas, the same bits
      CHECK(results[1][0][b][i] == results[0][0][b][i]);  // both runs, the same bits
    }
}

TEST_CASE("gpu: a bucket only one rank starts fails its wait within the timeout and breaks the group") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const BucketLayout layout = {{4099, DType::f32}};
  std::atomic<bool> rank0_done{false};
  std::string error, later;
  double elapsed = 0;
  auto options = [&](int rank) {
    NcclGroupOptions o;
    o.group = {.name = "stage 2", .rank = rank, .size = 2};
    o.layout = layout;
    o.device = rank;
    o.timeout = 2s;
    return o;
  };
  nccl_testing::run_ranks(
      [&] {
        RendezvousClient store(testing::client_options(server));
        DeviceStream stream(0);
        auto o = options(0);
        o.stream = stream;
        Tensor t = nccl_testing::upload(nccl_testing::random_bits(4099 * 4, 3), Shape{4099},
                                        DType::f32, 0, stream);
        NcclGradientAllReduce group(store, o);
        const auto start = Clock::now();
        error = error_of([&] { group.start({0, {{t.raw(), 4099, DType::f32}}})->wait(); });
        elapsed = seconds_since(start);
        later = error_of([&] { group.start({0, {{t.raw(), 4099, DType::f32}}}); });
        rank0_done = true;
      },
      [&] {  // joins, never starts the bucket, stays until rank 0 has given up
        RendezvousClient store(testing::client_options(server));
        DeviceStream stream(1);
        auto o = options(1);
        o.stream = stream;
        NcclGradientAllReduce group(store, o);
        while (!rank0_done) std::this_thread::sleep_for(10ms);
      });
  CAPTURE(error);
  CAPTURE(later);
  CHECK(error.find("collective: group 'stage 2' (rank 0 of 2) on cuda:0: bucket 0 (4099 f32)") == 0);
  CHECK(error.find("did not complete within 2 s") != std::string::npos);
  CHECK(elapsed < 5.0);
  CHECK(later.find("not started") != std::string::npos);
}

// A recovery cancels the stage groups' generation (GroupCancellation, set by the
// coordinator): a rank waiting for a bucket its peer never starts stops waiting at once,
// long before the group's timeout, and the group is broken; a group of the next
// generation is not touched.
TEST_CASE("gpu: a cancelled generation ends a rank's wait at once, well before the timeout") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  const BucketLayout layout = {{4099, DType::f32}};
  GroupCancellation cancellation;
  std::atomic<bool> rank0_done{false};
  std::string error, later;
  double elapsed = 0;
  auto options = [&](int rank) {
    NcclGroupOptions o;
    o.group = {.name = "stage 3", .rank = rank, .size = 2, .generation = 4};
    o.layout = layout;
    o.device = rank;
    o.timeout = 30s;
    o.cancellation = &cancellation;
    return o;
  };
  nccl_testing::run_ranks(
      [&] {
        RendezvousClient store(testing::client_options(server));
        DeviceStream stream(0);
        auto o = options(0);
        o.stream = stream;
        Tensor t = nccl_testing::upload(nccl_testing::random_bits(4099 * 4, 5), Shape{4099},
                                        DType::f32, 0, stream);
        NcclGradientAllReduce group(store, o);
        cancellation.cancel_below(4);  // an older generation: this group waits on
        std::thread coordinator([&] {
          std::this_thread::sleep_for(300ms);
          cancellation.cancel_below(5);
        });
        const auto start = Clock::now();
        error = error_of([&] { group.start({0, {{t.raw(), 4099, DType::f32}}})->wait(); });
        elapsed = seconds_since(start);
        coordinator.join();
        later = error_of([&] { group.start({0, {{t.raw(), 4099, DType::f32}}}); });
        rank0_done = true;
      },
      [&] {  // joins, never starts the bucket (a failed replica), stays until rank 0 is done
        RendezvousClient store(testing::client_options(server));
        DeviceStream stream(1);
        auto o = options(1);
        o.stream = stream;
        NcclGradientAllReduce group(store, o);
        while (!rank0_done) std::this_thread::sleep_for(10ms);
      });
  CAPTURE(error);
  CAPTURE(later);
  MESSAGE("waited " << elapsed << " s before the cancellation ended it (timeout 30 s)");
  CHECK(error.find("collective: group 'stage 3' (rank 0 of 2) on cuda:0: bucket 0 (4099 f32)") == 0);
  CHECK(error.find("cancelled: a recovery began") != std::string::npos);
  CHECK(elapsed >= 0.25);  // not before the cancellation
  CHECK(elapsed < 3.0);
  CHECK(later.find("not started") != std::string::npos);
}

// A bucket whose buffer another stream is still writing: start_after makes the group's
// own stream (none given) wait for that stream on the device, so the reduction reads the
// last values written. The producer zeroes and refills a 64 MiB buffer eight times after
// start_after is called from the host's point of view: a reduction that did not wait would
// read zeros or a mix. Each bucket's own time is measured.
TEST_CASE("gpu: start_after orders the reduction after the producing stream, each bucket is timed") {
  CONVEYOR_REQUIRE_TWO_GPUS();
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  constexpr std::size_t n = (std::size_t{1} << 24) + 5;
  std::vector<float> values[2] = {random_gradient(n, 77), random_gradient(n, 78)};
  std::vector<std::uint8_t> result[2];
  double elapsed_ms[2] = {0, 0};
  auto rank = [&](int r) {
    RendezvousClient store(testing::client_options(server));
    DeviceStream producer(r);
    Tensor source = nccl_testing::upload(encode(values[r], DType::f32), Shape{std::int64_t(n)},
                                         DType::f32, r, producer);
    Tensor target = nccl_testing::upload(encode(values[r], DType::f32), Shape{std::int64_t(n)},
                                         DType::f32, r, producer);
    CUDA_CHECK(cudaStreamSynchronize(producer));
    NcclGroupOptions o;
    o.group = {.name = "stage 3", .rank = r, .size = 2};
    o.layout = {{n, DType::f32}};
    o.device = r;
    o.timeout = 30s;  // o.stream stays null: the group's own stream
    NcclGradientAllReduce group(store, o);
    for (int k = 0; k < 8; ++k) {
      CUDA_CHECK(cudaMemsetAsync(target.raw(), 0, n * sizeof(float), producer));
      CUDA_CHECK(cudaMemcpyAsync(target.raw(), source.raw(), n * sizeof(float),
                                 cudaMemcpyDeviceToDevice, producer));
    }
    auto handle = group.start_after({0, {{target.raw(), n, DType::f32}}},
                                    static_cast<cudaStream_t>(producer));
    handle->wait();
    elapsed_ms[r] = handle->elapsed_ms();
    result[r] = nccl_testing::download(target, producer);
  };
  nccl_testing::run_ranks([&] { rank(0); }, [&] { rank(1); });
  const auto got = decode(result[0], DType::f32);
  std::size_t bad = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const double x0 = values[0][k], x1 = values[1][k];
    const double bound = std::ldexp(1.0, -24) * (std::fabs(x0) + std::fabs(x1)) / 2 * (1 + 1e-9);
    if (std::fabs(got[k] - (x0 + x1) / 2) > bound) ++bad;
  }
  CHECK(bad == 0);
  CHECK(result[1] == result[0]);
  MESSAGE("64 MiB f32 bucket: reduction " << elapsed_ms[0] << " ms on rank 0, " << elapsed_ms[1]
                                          << " ms on rank 1");
  CHECK(elapsed_ms[0] > 0.0);
  CHECK(elapsed_ms[1] > 0.0);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
