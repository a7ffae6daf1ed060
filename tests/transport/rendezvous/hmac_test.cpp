#include <doctest/doctest.h>

#include <fmt/format.h>

#include <string>

#include "transport/rendezvous/hmac.hpp"

using namespace conveyor::rendezvous;

TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2") {
  const std::string data = "what do ya want for nothing?";
  const Mac mac = hmac_sha256("Jefe", {reinterpret_cast<const std::uint8_t*>(data.data()), data.size()});
  std::string hex;
  for (std::uint8_t b : mac) hex += fmt::format("{:02x}", b);
  CHECK(hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("MAC comparison tells equal from different contents and sizes") {
  const Nonce nonce = make_nonce();
  const Mac a = hmac_sha256("token", nonce);
  Mac b = a;
  CHECK(equal_in_constant_time(a, b));
  b[31] ^= 1;
  CHECK(!equal_in_constant_time(a, b));
  CHECK(!equal_in_constant_time(a, std::span<const std::uint8_t>(a).first(31)));
  CHECK(!equal_in_constant_time(a, {}));
  CHECK(hmac_sha256("other token", nonce) != a);
}

TEST_CASE("two nonces differ") { CHECK(make_nonce() != make_nonce()); }
