// --serve [HOST:]PORT: PORT alone is loopback; a bad value is an error naming the flag and
// the value; hosts beyond loopback need a token.
#include <doctest/doctest.h>

#include "apps/watch/serve_address.hpp"
#include "kernels/common/error.hpp"

using conveyor::InputError;
using conveyor::watch::parse_serve_address;

TEST_CASE("a port alone binds loopback and needs no token") {
  const auto a = parse_serve_address("--serve", "8080");
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 8080);
  CHECK_FALSE(a.host_given);
  CHECK_FALSE(a.requires_token());
  CHECK(parse_serve_address("--serve", "0").port == 0);
}

TEST_CASE("a host beyond loopback needs a token and an IPv6 host goes in brackets") {
  const auto any = parse_serve_address("--serve", "0.0.0.0:9000");
  CHECK(any.host == "0.0.0.0");
  CHECK(any.port == 9000);
  CHECK(any.requires_token());
  const auto v6 = parse_serve_address("--serve", "[::1]:80");
  CHECK(v6.host == "::1");
  CHECK_FALSE(v6.requires_token());
  CHECK_FALSE(parse_serve_address("--serve", "localhost:1").requires_token());
  CHECK(parse_serve_address("--serve", "gpu-node-3:1").requires_token());
}

TEST_CASE("a bad --serve value names the flag and the value") {
  for (const char* bad : {"", "http", "80a", "65536", "host:", ":80", "::1:80", "[::1:80", "-1", "123456"}) {
    CAPTURE(bad);
    try {
      (void)parse_serve_address("--serve", bad);
      FAIL("no error for a bad value");
    } catch (const InputError& e) {
      const std::string what = e.what();
      CHECK(what.find("--serve '" + std::string(bad) + "'") != std::string::npos);
    }
  }
}
