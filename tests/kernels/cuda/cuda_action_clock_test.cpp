// The device clock of a CUDA stage (kernels/cuda/model/cuda_action_clock.hpp) against a
// real stream: spans cover the device's work, not the host's enqueue, sit inside the host
// window they ran in, keep stream order, and are not handed out before the device ran them.
// Guarded as the other files here: gpu_tests is built without CUDA too (no cuda_runtime_api.h).
#if CONVEYOR_WITH_CUDA
#include <atomic>
#include <chrono>
#include <thread>

#include "cuda_test_util.hpp"
#include "kernels/cuda/model/cuda_action_clock.hpp"

namespace conveyor::cuda_testing {
namespace {

using Clock = std::chrono::steady_clock;
std::int64_t host_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { (void)cudaFree(p); }
};

// Work of a known kind on the stream: repeated 512 MiB fills (~0.2 ms each on an H200).
void busy(cudaStream_t s, const DeviceBuffer& b, std::size_t bytes, int times) {
  for (int i = 0; i < times; ++i) CUDA_CHECK(cudaMemsetAsync(b.p, i & 0xff, bytes, s));
}

TEST_CASE("cuda action clock: spans are the device's work, inside the host window, in order") {
  CONVEYOR_REQUIRE_GPU();
  Stream stream;
  const std::size_t bytes = std::size_t{512} << 20;
  DeviceBuffer buffer(bytes);
  CudaActionClock clock(0, stream.s);

  const std::int64_t before = host_ns();
  const auto a = clock.begin();
  busy(stream.s, buffer, bytes, 20);
  clock.end(a);
  const std::int64_t enqueued = host_ns();
  const auto b = clock.begin();
  busy(stream.s, buffer, bytes, 5);
  clock.end(b);
  CUDA_CHECK(cudaStreamSynchronize(stream.s));
  const std::int64_t after = host_ns();

  const auto spans = clock.drain();
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].token == a);
  CHECK(spans[1].token == b);
  const double slack = 50e3;  // calibration error bound, ns
  CHECK(spans[0].start_ns >= before - slack);
  CHECK(spans[1].end_ns <= after + slack);
  CHECK(spans[0].end_ns <= spans[1].start_ns + 1000);  // one stream: one after the other
  const double device_a = static_cast<double>(spans[0].end_ns - spans[0].start_ns);
  const double device_b = static_cast<double>(spans[1].end_ns - spans[1].start_ns);
  INFO("a " << device_a / 1e3 << " us, b " << device_b / 1e3 << " us, enqueue "
            << (enqueued - before) / 1e3 << " us, window " << (after - before) / 1e3 << " us");
  CHECK(device_a > 3.0 * static_cast<double>(enqueued - before));  // not the enqueue time
  CHECK(device_a / device_b == doctest::Approx(4.0).epsilon(0.25));  // 20 fills vs 5
  CHECK(device_a + device_b >= 0.8 * static_cast<double>(after - before) - slack);
  CHECK(clock.poll().empty());
}

TEST_CASE("cuda action clock: poll never hands out an action the device has not run") {
  CONVEYOR_REQUIRE_GPU();
  Stream stream;
  CudaActionClock clock(0, stream.s);
  (void)clock.drain();
  std::atomic<bool> release{false};
  // The stream stops at a host function until the test lets it go.
  auto gate = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  const auto t = clock.begin();
  CUDA_CHECK(cudaLaunchHostFunc(stream.s, gate, &release));
  clock.end(t);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(clock.poll().empty());
  CHECK(cudaGetLastError() == cudaSuccess);  // "not ready" is not left as an error
  release = true;
  const auto spans = clock.drain();
  REQUIRE(spans.size() == 1);
  CHECK(spans[0].end_ns - spans[0].start_ns >= 15'000'000);  // the 20 ms the gate held it
}

TEST_CASE("cuda action clock: ending an action twice is a caller bug, named") {
  CONVEYOR_REQUIRE_GPU();
  Stream stream;
  CudaActionClock clock(0, stream.s);
  const auto t = clock.begin();
  clock.end(t);
  CHECK_THROWS_AS(clock.end(t), std::logic_error);
  CHECK(clock.drain().size() == 1);
}

}  // namespace
}  // namespace conveyor::cuda_testing
#endif  // CONVEYOR_WITH_CUDA
