// The status server over a run folder written by train's writers, fetched with a Beast
// client: /metrics, /api/status, / and 404, on loopback and beyond it with a token.
#include <doctest/doctest.h>

#include <cstdlib>

#include "apps/watch/serve_address.hpp"
#include "apps/watch/status_routes.hpp"
#include "apps/watch/status_server.hpp"
#include "kernels/common/error.hpp"
#include "tests/apps/watch/http_get.hpp"
#include "tests/apps/watch/run/run_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor::watch;
using conveyor::testing::http_request;
using conveyor::testing::RunFixture;
using conveyor::testing::TempDir;

TEST_CASE("a served run folder answers metrics, status, the page and 404, reading new rows per request") {
  TempDir dir;
  RunFixture run(dir.path());
  run.step(0);
  HttpServerOptions o;
  o.log = [](std::string_view) {};
  HttpServer server(o, status_routes(std::make_shared<StatusSite>(dir.path())));
  auto metrics = http_request(server.port(), "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(metrics.body.find("\nconveyor_step 1\n") != std::string::npos);
  run.step(1);  // written after the server started: the next request sees it
  const auto status = http_request(server.port(), "/api/status");
  CHECK(status.status == 200);
  CHECK(status.content_type == "application/json");
  CHECK(nlohmann::json::parse(status.body).at("step") == 2);
  const auto page = http_request(server.port(), "/");
  CHECK(page.status == 200);
  CHECK(page.content_type == "text/html; charset=utf-8");
  CHECK(page.body.find("<script src=\"/static/page.js\"") != std::string::npos);  // the live page
  CHECK(http_request(server.port(), "/../metrics.jsonl").status == 404);
  CHECK(http_request(server.port(), "/config.yaml").status == 404);
}

TEST_CASE("the events path sends the status JSON at once and again when a row comes") {
  namespace asio = boost::asio;
  TempDir dir;
  RunFixture run(dir.path());
  run.step(0);
  HttpServerOptions o;
  o.log = [](std::string_view) {};
  HttpServer server(o, status_routes(std::make_shared<StatusSite>(dir.path())));
  asio::io_context io;
  boost::beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
  asio::write(stream, asio::buffer(std::string("GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")));
  std::string got;
  char buf[4096];
  const auto read_until = [&](const std::string& text) {
    while (got.find(text) == std::string::npos) {
      boost::beast::error_code ec;
      const auto n = stream.read_some(asio::buffer(buf), ec);
      REQUIRE_FALSE(ec);
      got.append(buf, n);
    }
  };
  read_until("\"step\":1,");  // the first event: one step done
  CHECK(got.find("Content-Type: text/event-stream") != std::string::npos);
  CHECK(got.find("\r\n\r\ndata: {") != std::string::npos);
  run.step(1);
  read_until("\"step\":2,");  // the next event, within the 1 s period
  CHECK(got.find("\n\ndata: {") != std::string::npos);
}

TEST_CASE("serving beyond loopback needs CONVEYOR_SERVE_TOKEN, and then answers 401 without it") {
  TempDir dir;
  RunFixture run(dir.path());
  run.step(0);
  ::unsetenv(kServeTokenVariable);
  CHECK_THROWS_WITH_AS(status_server_spec("--serve", "0.0.0.0:0"),
                       doctest::Contains("--serve 0.0.0.0:0: 0.0.0.0 is reachable from other machines: set "
                                         "serve.token (train) or CONVEYOR_SERVE_TOKEN"),
                       conveyor::InputError);
  ::setenv(kServeTokenVariable, "tok", 1);
  const auto spec = status_server_spec("--serve", "0.0.0.0:0");
  ::unsetenv(kServeTokenVariable);
  const auto server = start_status_server(spec, dir.path(), "test");
  CHECK(http_request(server->port(), "/metrics").status == 401);
  CHECK(http_request(server->port(), "/api/status").status == 401);
  const auto ok = http_request(server->port(), "/metrics", {{"Authorization", "Bearer tok"}});
  CHECK(ok.status == 200);
  CHECK(ok.body.find("# TYPE conveyor_step gauge") != std::string::npos);
}

TEST_CASE("a run's serve.token is the token, ahead of CONVEYOR_SERVE_TOKEN") {
  TempDir dir;
  RunFixture run(dir.path());
  run.step(0);
  ::setenv(kServeTokenVariable, "from-env", 1);
  const auto spec = status_server_spec("--serve", "0.0.0.0:0", "from-config");
  ::unsetenv(kServeTokenVariable);
  CHECK(spec.token == "from-config");
  CHECK(status_server_spec("--serve", "0.0.0.0:0", "only-config").token == "only-config");
  const auto server = start_status_server(spec, dir.path(), "test");
  CHECK(http_request(server->port(), "/metrics", {{"Authorization", "Bearer from-env"}}).status == 401);
  CHECK(http_request(server->port(), "/metrics", {{"Authorization", "Bearer from-config"}}).status == 200);
}
