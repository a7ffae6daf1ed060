// The UCX hub: operations posted from any thread complete on the hub's thread, tensors
// arrive intact both ways, and a receive that nobody matches fails at its deadline with
// an error naming the tag and the peer.
#include <doctest/doctest.h>

#include <future>

#include "tests/transport/ucx/ucx_test_support.hpp"
#include "transport/ucx/ucx_hub.hpp"

using namespace conveyor;
using namespace conveyor::ucx_test;

namespace {

std::future<Tensor> receive(UcxHub& hub, int peer, std::uint64_t tag, Shape shape,
                            std::chrono::milliseconds timeout) {
  auto p = std::make_shared<std::promise<Tensor>>();
  hub.receive(peer, tag, std::move(shape), DType::f32, timeout, [p](Tensor t, std::exception_ptr e) {
    if (e) p->set_exception(e);
    else p->set_value(std::move(t));
  });
  return p->get_future();
}

}  // namespace

TEST_CASE("two hubs exchange tensors both ways while their callers do something else") {
  UcxHub a(test_options("node 0")), b(test_options("node 1"));
  a.connect(1, b.address(), "node 1");
  b.connect(0, a.address(), "node 0");
  const std::uint64_t t1 = pack_tag({3, 1, 0, TagKind::activation});
  const std::uint64_t t2 = pack_tag({3, 1, 0, TagKind::gradient});
  auto at_b = receive(b, 0, t1, Shape{1 << 20}, std::chrono::seconds(20));
  auto at_a = receive(a, 1, t2, Shape{64}, std::chrono::seconds(20));
  std::promise<bool> sent;
  a.send(1, t1, filled(0, 1 << 20), std::chrono::seconds(20),
         [&](Tensor, std::exception_ptr e) { sent.set_value(e == nullptr); });
  b.send(0, t2, filled(1, 64), std::chrono::seconds(20), nullptr);
  const Tensor big = at_b.get(), small = at_a.get();
  CHECK(sent.get_future().get());
  int wrong = 0;
  for (std::int64_t i = 0; i < big.numel(); ++i) wrong += big.f32()[i] != static_cast<float>(pattern(0, i));
  for (std::int64_t i = 0; i < small.numel(); ++i) wrong += small.f32()[i] != static_cast<float>(pattern(1, i));
  CHECK(wrong == 0);
  CHECK(a.drain_sends(std::chrono::seconds(5)));
}

TEST_CASE("a receive nobody sends to fails at its deadline naming the tag and the peer") {
  UcxHub a(test_options("node 0")), b(test_options("node 1"));
  b.connect(0, a.address(), "node 0");
  const auto start = std::chrono::steady_clock::now();
  auto f = receive(b, 0, pack_tag({2, 7, 5, TagKind::activation}), Shape{16},
                   std::chrono::milliseconds(200));
  std::string what;
  try {
    f.get();
  } catch (const UcxTimeout& e) {
    what = e.what();
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(what.find("activation edge 2 step 7 mb 5") != std::string::npos);
  CHECK(what.find("from node 0") != std::string::npos);
  CHECK(what.find("within 200 ms on node 1") != std::string::npos);
}

TEST_CASE("an operation for a peer the hub has no connection to fails at once") {
  UcxHub a(test_options("node 0"));
  auto f = receive(a, 9, pack_tag({0, 0, 0, TagKind::activation}), Shape{4},
                   std::chrono::seconds(5));
  CHECK_THROWS_WITH_AS(f.get(), doctest::Contains("no connection to peer 9"), UcxError);
}
