// The token check in front of a server beyond loopback: a bearer header, a cookie, or
// ?token= once (which sets the cookie); anything else is refused.
#include <doctest/doctest.h>

#include "apps/watch/serve_auth.hpp"

using namespace conveyor::watch;

TEST_CASE("a server without a token lets every request through") {
  CHECK(authorize("", "/metrics", "", "").allowed);
}

TEST_CASE("the token is taken from a bearer header, a cookie or the URL once") {
  const std::string token = "s3cret/+=";
  CHECK(authorize(token, "/metrics", "Bearer s3cret/+=", "").allowed);
  CHECK_FALSE(authorize(token, "/metrics", "Bearer s3cret", "").allowed);
  CHECK_FALSE(authorize(token, "/metrics", "Basic s3cret/+=", "").allowed);
  CHECK_FALSE(authorize(token, "/metrics", "", "").allowed);

  const auto by_url = authorize(token, "/?x=1&token=" + percent_encode(token), "", "");
  CHECK(by_url.allowed);
  REQUIRE(by_url.set_cookie);
  CHECK(by_url.set_cookie->starts_with("conveyor_token=" + percent_encode(token) + ";"));
  CHECK(by_url.set_cookie->find("HttpOnly") != std::string::npos);
  CHECK_FALSE(authorize(token, "/?token=wrong", "", "").allowed);

  const std::string cookie = "other=1; " + by_url.set_cookie->substr(0, by_url.set_cookie->find(';'));
  const auto by_cookie = authorize(token, "/api/status", "", cookie);
  CHECK(by_cookie.allowed);
  CHECK_FALSE(by_cookie.set_cookie);  // already set
  CHECK_FALSE(authorize(token, "/", "", "conveyor_token=nope").allowed);
}

TEST_CASE("query parameters are percent-decoded and the path drops the query") {
  CHECK(query_parameter("/a?b=1&token=x%2By+z", "token") == std::optional<std::string>("x+y z"));
  CHECK_FALSE(query_parameter("/a?tokens=1", "token"));
  CHECK(target_path("/api/status?token=1") == "/api/status");
}
