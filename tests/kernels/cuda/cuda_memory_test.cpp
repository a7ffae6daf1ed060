// Device memory: the caching allocator, device and pinned storage, copies, bf16 casts.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <string>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/cast.hpp"
#include "kernels/cuda/copy.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

TEST_CASE("cuda allocator size classes waste at most a quarter (no GPU needed)") {
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(513) == 1024);
  CHECK(CachingAllocator::size_class(4096) == 4096);
  CHECK(CachingAllocator::size_class(4097) == 5120);
  CHECK(CachingAllocator::size_class(std::size_t{100} << 20) == std::size_t{100} << 20);
  for (std::size_t b : {std::size_t{5000}, std::size_t{70000}, std::size_t{3} << 20,
                        (std::size_t{64} << 20) - 1, (std::size_t{64} << 20) + 1}) {
    const std::size_t c = CachingAllocator::size_class(b);
    CHECK(c >= b);
    CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(b) + 4096);
    CHECK(CachingAllocator::size_class(c) == c);  // classes are fixed points
  }
}

TEST_CASE("cuda allocator reuses a released block on the same stream and reports peak bytes") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s1, s2;
  CachingAllocator& a = cuda_allocator(current_device());
  a.reset_peak();
  const AllocatorStats before = a.stats();
  const std::size_t bytes = (std::size_t{3} << 20) + 123;
  const std::size_t cls = CachingAllocator::size_class(bytes);

  void* p1 = a.allocate(bytes, s1, "test block 1");
  void* p2 = a.allocate(bytes, s1, "test block 2");
  REQUIRE(p1 != nullptr);
  REQUIRE(p2 != nullptr);
  CHECK(p1 != p2);
  CHECK(reinterpret_cast<std::uintptr_t>(p1) % 256 == 0);
  CHECK(a.stats().in_use == before.in_use + 2 * cls);
  CHECK(a.stats().peak_in_use >= before.in_use + 2 * cls);
  a.release(p1);
  CHECK(a.stats().in_use == before.in_use + cls);

  const auto hits = a.stats().cache_hits;
  void* p3 = a.allocate(bytes, s1, "test block 3");  // same stream, same class: reused
  CHECK(p3 == p1);
  CHECK(a.stats().cache_hits == hits + 1);

  a.release(p2);
  void* p4 = a.allocate(bytes, s2, "test block on another stream");  // never crosses streams
  CHECK(p4 != p2);
  CHECK(p4 != p3);
  a.release(p3);
  a.release(p4);
  CHECK(a.stats().in_use == before.in_use);
  CHECK(a.stats().peak_in_use >= before.in_use + 2 * cls);
  CHECK(a.stats().cached() >= 3 * cls);

  a.empty_cache();
  CHECK(a.stats().cached() == 0);
  CHECK(a.allocate(0, s1, "empty") == nullptr);
}

TEST_CASE("cuda allocator out-of-memory error names the bytes and the label and the free memory") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  CachingAllocator& a = cuda_allocator(current_device());
  const std::size_t huge = std::size_t{1} << 50;  // 1 PiB
  std::string message;
  try {
    (void)a.allocate(huge, s, "huge test activation");
  } catch (const CudaOutOfMemory& e) {
    message = e.what();
    CHECK(e.requested() == huge);
    CHECK(e.free_bytes() > 0);
  }
  INFO(message);
  CHECK(message.find("huge test activation") != std::string::npos);
  CHECK(message.find(std::to_string(huge)) != std::string::npos);
  CHECK(message.find("free") != std::string::npos);
  CHECK(message.find("cuda:") != std::string::npos);
  // The failure leaves no error behind: later work still runs.
  CHECK(cudaGetLastError() == cudaSuccess);
  DeviceBuffer ok(1024, current_device(), s, "after oom");
  CHECK(ok.data() != nullptr);
}

TEST_CASE("cuda to_device and to_host round-trip f32 bf16 and i32 tensors through device and pinned memory") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int dev = current_device();
  Tensor f = Tensor::zeros({3, 5});
  for (std::int64_t i = 0; i < f.numel(); ++i) f.f32()[i] = 0.5f * static_cast<float>(i) - 3.0f;
  Tensor d = to_device(f, dev, s);
  CHECK(d.device() == Device::cuda(dev));
  CHECK(d.shape() == f.shape());
  Tensor back = to_host(d, s);
  CHECK(back.device().is_cpu());
  CHECK(same_bytes(back.raw(), f.raw(), f.bytes()));

  Tensor b = to_bf16_host(f);
  CHECK(b.dtype() == DType::bf16);
  Tensor bd = to_device(b, dev, s);
  Tensor bf = to_f32_host(to_host(bd, s));
  for (std::int64_t i = 0; i < f.numel(); ++i) CHECK(bf.f32()[i] == f.f32()[i]);  // exact

  Tensor ids = Tensor::zeros({7}, DType::i32);
  for (int i = 0; i < 7; ++i) ids.i32()[i] = 1000 * i - 3;
  Tensor ids_back = to_host(to_device(ids, dev, s), s);
  CHECK(same_bytes(ids_back.raw(), ids.raw(), ids.bytes()));

  Tensor pinned = zeros_pinned({3, 5});
  CHECK(pinned.device().is_cpu());
  CHECK(is_pinned(*pinned.storage()));
  copy_tensor(pinned, d, s);
  s.sync();
  CHECK(same_bytes(pinned.raw(), f.raw(), f.bytes()));

  Tensor z = zeros_cuda({4, 4}, DType::f32, dev, s, "zeros");
  Tensor zh = to_host(z, s);
  for (float x : zh.f32_span()) CHECK(x == 0.0f);

  Tensor wrong = Tensor::zeros({2, 2});
  CHECK_THROWS_AS(copy_tensor(wrong, d, s), std::invalid_argument);
}

TEST_CASE("cuda bf16 casts agree bit for bit with the host conversion") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  std::vector<float> x = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.005859375f, 3.14159265f, -2.5e-8f,
                          65504.0f, 1e30f, -1e-30f, 0.1f, 1.0f / 3.0f};
  const auto more = random_bf16(1000, 1, 10.0);
  for (float m : more) x.push_back(m * 1.0001f);  // not representable: exercises rounding
  DeviceBuffer in = upload(x, s);
  DeviceBuffer out(x.size() * 2, current_device(), s, "cast out");
  cast_f32_to_bf16(out.as<bf16>(), in.as<float>(), static_cast<std::int64_t>(x.size()), s);
  const auto bits = download<std::uint16_t>(out.data(), x.size(), s);
  CHECK(bits == to_bf16_bits(x));
  DeviceBuffer back(x.size() * 4, current_device(), s, "cast back");
  cast_bf16_to_f32(back.as<float>(), out.as<bf16>(), static_cast<std::int64_t>(x.size()), s);
  CHECK(download_f32(back.data(), x.size(), s) == from_bf16_bits(bits));
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
