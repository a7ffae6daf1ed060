// A peer's published worker address reaches ucp_ep_create only when it is exactly what a
// conveyor worker published: a truncated, foreign or corrupted address is an error naming
// the peer (UCX itself aborts the process on such bytes), and the worker stays usable.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/transport/ucx/ucx_test_support.hpp"
#include "transport/ucx/worker_address.hpp"

using namespace conveyor;
using namespace conveyor::ucx_test;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

std::string error_of(std::span<const std::byte> sealed) {
  try {
    open_worker_address(sealed, "node 3");
  } catch (const UcxError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a sealed worker address opens to the same bytes") {
  for (std::size_t n : {1u, 37u, 512u, 4096u}) {
    const auto raw = random_bytes(n, static_cast<unsigned>(n));
    const auto sealed = seal_worker_address(raw);
    CHECK(sealed.size() == n + 40);
    const auto opened = open_worker_address(sealed, "node 1");
    CHECK(std::vector<std::byte>(opened.begin(), opened.end()) == raw);
  }
}

TEST_CASE("a damaged worker address is refused naming the peer") {
  const auto sealed = seal_worker_address(random_bytes(300, 7));
  CHECK(error_of({}).find("published by node 3 is empty") != std::string::npos);

  auto truncated = sealed;
  truncated.resize(sealed.size() - 1);
  CHECK(error_of(truncated).find("truncated or corrupt") != std::string::npos);
  CHECK(error_of(std::span(sealed).first(20)).find("not a conveyor worker address") !=
        std::string::npos);

  auto extended = sealed;
  extended.push_back(std::byte{1});
  CHECK(error_of(extended).find("says 300 bytes but holds 301") != std::string::npos);

  auto foreign = random_bytes(340, 9);  // a raw UCX address, or any other program's bytes
  CHECK(error_of(foreign).find("not a conveyor worker address") != std::string::npos);

  for (std::size_t at : {std::size_t{8}, std::size_t{39}, std::size_t{40}, sealed.size() - 1}) {
    auto flipped = sealed;
    flipped[at] ^= std::byte{0x10};
    CAPTURE(at);
    CHECK(error_of(flipped).find("fails its SHA-256 check") != std::string::npos);
  }
}

TEST_CASE("connecting a worker to a damaged address throws before UCX sees it") {
  UcxWorker a{test_options("rank 0")};
  UcxWorker b{test_options("rank 1")};
  auto garbage = b.address();
  garbage.resize(garbage.size() / 2);
  CHECK_THROWS_WITH_AS(a.connect(garbage, "rank 1"),
                       doctest::Contains("published by rank 1"), UcxError);
  auto corrupted = b.address();
  for (std::size_t i = 40; i < corrupted.size(); i += 3) corrupted[i] = std::byte{0xa5};
  CHECK_THROWS_AS(a.connect(corrupted, "rank 1"), UcxError);
  // The worker is intact: a real address still connects.
  CHECK_NOTHROW(a.connect(b.address(), "rank 1"));
}
