// The receive-buffer pool: a buffer goes back only when its last tensor handle goes away,
// is reused by the next take of its size, is never handed to two live tensors, and the
// pool keeps no more idle buffers than its limits allow.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "tests/transport/ucx/ucx_test_support.hpp"
#include "transport/ucx/host_buffer_pool.hpp"
#include "transport/ucx/ucx_worker.hpp"

using namespace conveyor;

TEST_CASE("a pooled buffer is reused only after its last tensor handle is gone") {
  auto pool = HostBufferPool::create();
  Tensor a = pool->take(Shape{1024}, DType::f32);
  const void* first = a.raw();
  Tensor alias = a;  // a second handle to the same storage
  a = Tensor();
  CHECK(pool->free_buffers() == 0);
  Tensor b = pool->take(Shape{1024}, DType::f32);
  CHECK(b.raw() != first);  // `alias` still holds the first buffer
  alias = Tensor();
  CHECK(pool->free_buffers() == 1);
  Tensor c = pool->take(Shape{32, 32}, DType::f32);  // same byte size, other shape
  CHECK(c.raw() == first);
  CHECK(c.shape() == Shape{32, 32});
  CHECK(pool->free_buffers() == 0);
}

TEST_CASE("live tensors from the pool never share a buffer") {
  auto pool = HostBufferPool::create();
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> live;
    std::set<const void*> seen;
    for (int i = 0; i < 12; ++i) {
      live.push_back(pool->take(Shape{256}, DType::f32));
      CHECK(seen.insert(live.back().raw()).second);
      std::memset(live.back().raw(), i, live.back().bytes());
    }
    for (int i = 0; i < 12; ++i)  // nobody wrote over another tensor's bytes
      CHECK(static_cast<const unsigned char*>(live[i].raw())[255 * 4] == i);
  }
}

TEST_CASE("the pool keeps at most its limits of idle buffers") {
  auto pool = HostBufferPool::create({.max_free_per_size = 2, .max_free_bytes = 3 * 4096});
  {
    std::vector<Tensor> live;
    for (int i = 0; i < 5; ++i) live.push_back(pool->take(Shape{1024}, DType::f32));
  }
  CHECK(pool->free_buffers() == 2);  // per size
  { Tensor t = pool->take(Shape{2048}, DType::f32); }  // 8 KiB more would pass 12 KiB
  CHECK(pool->free_buffers() == 2);
  CHECK(pool->free_bytes() == 2 * 4096);
}

TEST_CASE("tensors from the pool may outlive the pool's owner and be released on another thread") {
  Tensor kept;
  {
    auto pool = HostBufferPool::create();
    kept = pool->take(Shape{7}, DType::f32);  // not a multiple of the alignment
    kept.f32()[6] = 1.5f;
  }
  CHECK(kept.f32()[6] == 1.5f);
  std::thread([t = std::move(kept)]() mutable { t = Tensor(); }).join();
  auto pool = HostBufferPool::create();
  CHECK(pool->take(Shape{0}, DType::f32).bytes() == 0);
}

TEST_CASE("a UCX receive lands in a pooled buffer that the next receive of its size reuses") {
  UcxWorker w0(ucx_test::test_options("rank 0"));
  UcxWorker w1(ucx_test::test_options("rank 1"));
  UcxEndpoint& to1 = w0.connect(w1.address(), "rank 1");
  UcxEndpoint& to0 = w1.connect(w0.address(), "rank 0");
  const void* first = nullptr;
  for (int step = 0; step < 3; ++step) {
    const std::uint64_t tag = pack_tag({.edge = 1, .step = step, .micro_batch = 0,
                                        .kind = TagKind::activation});
    const Tensor sent = ucx_test::filled(0, 4096);
    UcxRequest rx = to0.post_receive(tag, Shape{4096}, DType::f32);
    UcxRequest tx = to1.post_send(tag, sent);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!(rx.done() && tx.done())) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      w0.progress();
      w1.progress();
    }
    tx.wait();
    Tensor got = rx.wait();
    CHECK(std::memcmp(got.raw(), sent.raw(), sent.bytes()) == 0);
    if (step == 0) first = got.raw();
    CHECK(got.raw() == first);  // the previous step's tensor went back to the pool
    CHECK(w1.receive_buffers().free_buffers() == 0);
  }
}
