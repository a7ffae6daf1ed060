// A worker with wakeup (UcxOptions::wakeup, the hub's) blocks in wait_for_event until
// bytes arrive, not until its timeout; a worker without it does not wait at all, so that
// its caller paces its polls itself. And a hub whose thread blocks on UCX's events takes
// each op that is queued meanwhile at once.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "tests/transport/ucx/ucx_test_support.hpp"
#include "transport/ucx/ucx_hub.hpp"
#include "transport/ucx/ucx_worker.hpp"

using namespace conveyor;
using namespace conveyor::ucx_test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("a worker with wakeup waits for the bytes of a receive, not for its timeout") {
  UcxOptions with_wakeup = test_options("rank 1");
  with_wakeup.wakeup = true;
  UcxWorker w0{test_options("rank 0")};
  UcxWorker w1{with_wakeup};
  UcxEndpoint& to1 = w0.connect(w1.address(), "rank 1");
  UcxEndpoint& to0 = w1.connect(w0.address(), "rank 0");
  const std::uint64_t tag = pack_tag({.edge = 1, .step = 2, .micro_batch = 0, .kind = TagKind::activation});
  UcxRequest receive = to0.post_receive(tag, Shape{1 << 16}, DType::f32);
  std::atomic<bool> sent{false};
  std::thread sender([&] {
    std::this_thread::sleep_for(100ms);
    to1.send(tag, filled(0, 1 << 16), 20s);
    sent = true;
  });
  const auto start = Clock::now();
  int waits = 0;
  while (!receive.done() && Clock::now() - start < 20s) {
    if (w1.progress()) continue;
    CHECK(w1.wait_for_event(std::chrono::microseconds(5s), -1));
    ++waits;
  }
  const auto took = Clock::now() - start;
  sender.join();
  CHECK(sent);
  CHECK(took < 4s);  // woken by the bytes, not by the 5 s bound of a wait
  CHECK(waits >= 1);
  CHECK(wrong_elements(receive.wait(1s), 0) == 0);
}

TEST_CASE("a worker without wakeup does not wait for events: its caller polls") {
  UcxWorker w{test_options("rank 0")};
  const auto start = Clock::now();
  CHECK_FALSE(w.wait_for_event(std::chrono::microseconds(2s), -1));
  CHECK(Clock::now() - start < 1s);
}

TEST_CASE("a hub blocked on UCX's events takes an op queued meanwhile at once") {
  UcxHub a(test_options("node 0")), b(test_options("node 1"));
  a.connect(1, b.address(), "node 1");
  b.connect(0, a.address(), "node 0");
  // A receive nobody answers keeps b's thread waiting on events the whole time.
  b.receive(0, pack_tag({9, 9, 9, TagKind::gradient}), Shape{4}, DType::f32, 30s, nullptr);
  // 100 messages one after another, each queued while both threads are blocked: were the
  // queue's wake-up lost, each would wait for the hub's 10 ms bound (1 s in all).
  const auto start = Clock::now();
  int wrong = 0;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t tag = pack_tag({1, i, 0, TagKind::activation});
    std::promise<Tensor> got;
    b.receive(0, tag, Shape{16}, DType::f32, 20s, [&](Tensor t, std::exception_ptr e) {
      if (e) got.set_exception(e);
      else got.set_value(std::move(t));
    });
    std::this_thread::sleep_for(1ms);  // long enough for both hub threads to block
    a.send(1, tag, filled(0, 16), 20s, nullptr);
    wrong += static_cast<int>(wrong_elements(got.get_future().get(), 0));
  }
  const auto took = Clock::now() - start;
  CHECK(wrong == 0);
  CHECK(took < 800ms);  // 100 × (1 ms + a round trip), not 100 × 10 ms more
  b.abandon();
  a.abandon();
}
