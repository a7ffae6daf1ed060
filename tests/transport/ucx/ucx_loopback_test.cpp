// Two UCX workers in one process: tensors of every size arrive intact, tags are matched
// whatever order messages come in, and nothing waits past its deadline.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/ucx/ucx_test_support.hpp"
#include "transport/ucx/ucx_worker.hpp"

using namespace conveyor;
using namespace conveyor::ucx_test;
using namespace std::chrono_literals;

namespace {

// Worker 0 and worker 1, connected both ways: rank 0 sends on `to1`, rank 1 receives
// on `to0` (its endpoint to rank 0).
struct Pair {
  UcxWorker w0{test_options("rank 0")};
  UcxWorker w1{test_options("rank 1")};
  UcxEndpoint& to1 = w0.connect(w1.address(), "rank 1");
  UcxEndpoint& to0 = w1.connect(w0.address(), "rank 0");
};

std::uint64_t tag(int step, int mb = 0, TagKind kind = TagKind::activation) {
  return pack_tag({.edge = 1, .step = step, .micro_batch = mb, .kind = kind});
}

// Progresses both workers until every request is done (bounded).
void drive(Pair& p, std::vector<UcxRequest*> requests) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  auto all_done = [&] {
    for (auto* r : requests)
      if (!r->done()) return false;
    return true;
  };
  while (!all_done()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    p.w0.progress();
    p.w1.progress();
  }
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("tensors from 8 B to 64 MiB cross between two UCX workers intact") {
  Pair p;
  MESSAGE("transports: " << test_transports() << "\n" << p.to1.transport_info());
  const std::int64_t sizes[] = {8, 4096, 65536 + 4, 1 << 20, 16 << 20, 64 << 20};  // bytes
  int step = 0;
  for (std::int64_t bytes : sizes) {
    for (DType dtype : {DType::f32, DType::i32}) {
      CAPTURE(bytes);
      const std::int64_t numel = bytes / 4;
      const Tensor sent = filled(0, numel, dtype);
      std::exception_ptr sender_error;
      std::thread sender([&] {
        try {
          p.to1.send(tag(step), sent);
        } catch (...) {
          sender_error = std::current_exception();
        }
      });
      const Tensor got = p.to0.receive(tag(step), Shape{numel}, dtype);
      sender.join();
      REQUIRE_FALSE(sender_error);
      CHECK(got.numel() == numel);
      CHECK(got.dtype() == dtype);
      CHECK_FALSE(got.shares_storage_with(sent));
      CHECK(wrong_elements(got, 0) == 0);
      ++step;
    }
  }
}

TEST_CASE("UCX receives posted out of order get the message with their tag") {
  Pair p;
  // Receives wait for steps 2, 0, 1 while the sender sends 0, 1, 2, each from its own
  // "rank" so a mismatch shows; 1 MiB messages take the rendezvous protocol, 64 B ones
  // go eagerly.
  for (std::int64_t numel : {16, 1 << 18}) {
    CAPTURE(numel);
    std::vector<UcxRequest> receives;
    for (int step : {2, 0, 1}) receives.push_back(p.to0.post_receive(tag(step), Shape{numel}, DType::f32));
    std::vector<UcxRequest> sends;
    for (int step : {0, 1, 2}) sends.push_back(p.to1.post_send(tag(step), filled(10 + step, numel)));
    std::vector<UcxRequest*> all;
    for (auto& r : receives) all.push_back(&r);
    for (auto& r : sends) all.push_back(&r);
    drive(p, all);
    CHECK(wrong_elements(receives[0].wait(), 12) == 0);
    CHECK(wrong_elements(receives[1].wait(), 10) == 0);
    CHECK(wrong_elements(receives[2].wait(), 11) == 0);
    for (auto& s : sends) s.wait();
  }
}

TEST_CASE("UCX messages sent before their receive is posted wait for it and are matched by tag") {
  Pair p;
  // Kinds and micro-batches differ only in their tag bits; unexpected messages queue.
  std::vector<UcxRequest> sends;
  sends.push_back(p.to1.post_send(tag(5, 1, TagKind::gradient), filled(1, 64)));
  sends.push_back(p.to1.post_send(tag(5, 1, TagKind::activation), filled(2, 64)));
  sends.push_back(p.to1.post_send(tag(5, 0, TagKind::activation), filled(3, 64)));
  for (int i = 0; i < 100; ++i) {
    p.w0.progress();
    p.w1.progress();
  }
  UcxRequest a = p.to0.post_receive(tag(5, 0, TagKind::activation), Shape{64}, DType::f32);
  UcxRequest b = p.to0.post_receive(tag(5, 1, TagKind::gradient), Shape{64}, DType::f32);
  UcxRequest c = p.to0.post_receive(tag(5, 1, TagKind::activation), Shape{64}, DType::f32);
  drive(p, {&a, &b, &c, &sends[0], &sends[1], &sends[2]});
  CHECK(wrong_elements(a.wait(), 3) == 0);
  CHECK(wrong_elements(b.wait(), 1) == 0);
  CHECK(wrong_elements(c.wait(), 2) == 0);
}

TEST_CASE("a UCX receive with no sender times out naming the tag and the peer") {
  Pair p;
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    p.to0.receive(tag(7, 3), Shape{1024}, DType::f32, 200ms);
  } catch (const UcxTimeout& e) {
    message = e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO(message);
  CHECK(message.find("receive of activation edge 1 step 7 mb 3") != std::string::npos);
  CHECK(message.find("from rank 0") != std::string::npos);
  CHECK(message.find("within 200 ms on rank 1") != std::string::npos);
  CHECK(elapsed >= 200ms);
  CHECK(elapsed < 5s);
  // The cancelled receive does not take a later message with its tag.
  std::thread sender([&] { CHECK_NOTHROW(p.to1.send(tag(7, 3), filled(0, 1024))); });
  const Tensor got = p.to0.receive(tag(7, 3), Shape{1024}, DType::f32);
  sender.join();
  CHECK(wrong_elements(got, 0) == 0);
}

TEST_CASE("a UCX send nobody receives times out naming the tag and the peer") {
  Pair p;
  // 4 MiB goes by rendezvous, which needs the receiver: the send cannot complete.
  const std::string message =
      error_of([&] { p.to1.send(tag(9), filled(0, 1 << 20), std::chrono::milliseconds(200)); });
  CHECK(message.find("send of activation edge 1 step 9 mb 0") != std::string::npos);
  CHECK(message.find("to rank 1") != std::string::npos);
  CHECK(message.find("within 200 ms") != std::string::npos);
  // The abandoned send's buffer is kept alive by the worker; it is delivered once a
  // receive appears and the sender's worker makes progress.
  std::atomic<bool> received{false};
  Tensor got;
  std::string receive_error;
  std::thread receiver([&] {
    try {
      got = p.to0.receive(tag(9), Shape{1 << 20}, DType::f32, 15s);
    } catch (const std::exception& e) {
      receive_error = e.what();
    }
    received = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!received && std::chrono::steady_clock::now() < deadline) p.w0.progress();
  receiver.join();
  REQUIRE(receive_error.empty());
  CHECK(wrong_elements(got, 0) == 0);
}

TEST_CASE("a UCX message of the wrong length is an error naming both lengths") {
  Pair p;
  // Longer than expected: UCX truncates.
  UcxRequest s1 = p.to1.post_send(tag(1), filled(0, 32));
  UcxRequest r1 = p.to0.post_receive(tag(1), Shape{16}, DType::f32);
  drive(p, {&s1, &r1});
  const std::string longer = error_of([&] { r1.wait(); });
  CHECK(longer.find("longer than the 64 bytes expected") != std::string::npos);
  CHECK(longer.find("from rank 0") != std::string::npos);
  // Shorter than expected.
  UcxRequest s2 = p.to1.post_send(tag(2), filled(0, 8));
  UcxRequest r2 = p.to0.post_receive(tag(2), Shape{16}, DType::f32);
  drive(p, {&s2, &r2});
  const std::string shorter = error_of([&] { r2.wait(); });
  CHECK(shorter.find("received 32 bytes, expected 64") != std::string::npos);
}

TEST_CASE("a dropped UCX receive is cancelled and the next receive with its tag gets the message") {
  Pair p;
  { UcxRequest dropped = p.to0.post_receive(tag(4), Shape{256}, DType::f32); }
  std::thread sender([&] { CHECK_NOTHROW(p.to1.send(tag(4), filled(0, 256))); });
  const Tensor got = p.to0.receive(tag(4), Shape{256}, DType::f32);
  sender.join();
  CHECK(wrong_elements(got, 0) == 0);
}

TEST_CASE("a UCX send refuses a tensor that is not in host memory") {
  Pair p;
  CHECK_THROWS_AS(p.to1.post_send(tag(0), Tensor()), std::invalid_argument);
}

TEST_CASE("a UCX worker refuses an unknown transport by name") {
  UcxOptions o = test_options("rank 0");
  o.transports = "no_such_transport";
  const std::string message = error_of([&] { UcxWorker w(o); });
  INFO(message);
  CHECK(message.find("ucp_init failed for worker rank 0 with TLS=no_such_transport") != std::string::npos);
}
