// The server of a training job against clients that are wrong, slow or many, on real
// sockets: a bad token is 401, a path outside the served files 404, oversized headers
// 431, a client that sends half a request and stalls is closed after the io timeout,
// and 500 connections at once are all answered while the run trains on, every step
// done, none skipped, no recovery.
#include <doctest/doctest.h>

#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tests/apps/watch/http_get.hpp"
#include "tests/apps/watch/run/served_job.hpp"

using namespace conveyor::testing;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr const char* kToken = "s3cret-token";
const std::pair<std::string, std::string> kAuth{"Authorization", std::string("Bearer ") + kToken};

std::unique_ptr<beast::tcp_stream> connected(asio::io_context& io, std::uint16_t port) {
  auto s = std::make_unique<beast::tcp_stream>(io);
  s->expires_after(std::chrono::seconds(60));
  s->connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  return s;
}

// One request on an open connection; its status (0: no reply).
asio::awaitable<void> ask(beast::tcp_stream& s, unsigned& status) {
  http::request<http::empty_body> req{http::verb::get, "/api/status", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(kAuth.first, kAuth.second);
  beast::error_code ec;
  co_await http::async_write(s, req, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> res;
  res.body_limit(64u << 20);
  co_await http::async_read(s, buffer, res, asio::redirect_error(asio::use_awaitable, ec));
  if (!ec && !res.get().body().empty() && res.get().body().front() == '{') status = res.get().result_int();
}

struct Lines {
  std::size_t steps = 0, recoveries = 0, skipped = 0, summaries = 0;
};

Lines count_rows(const fs::path& metrics) {
  Lines n;
  for (const auto& line : split_lines(read_text(metrics))) {
    const auto row = nlohmann::json::parse(line);
    const std::string event = row.value("event", "");
    n.steps += event.empty();
    n.recoveries += event == "recovery";
    n.skipped += event == "nan";
    n.summaries += event == "summary";
  }
  return n;
}

}  // namespace

TEST_CASE("the server refuses bad tokens, unknown paths and huge headers, drops a stalled client, "
          "and answers 500 connections at once while every training step is done") {
  TempDir dir;
  ::setenv("CONVEYOR_SERVE_TOKEN", kToken, 1);  // the child's token, on loopback too
  constexpr int kSteps = 200;
  ServedJob job(dir.path(), {"train.steps=" + std::to_string(kSteps), "train.eval_every=0"});
  ::unsetenv("CONVEYOR_SERVE_TOKEN");
  REQUIRE(job.port != 0);
  REQUIRE(job.wait_for_steps(3));

  // A client that sends half a request and stalls: the server closes it after its io
  // timeout (10 s), on its own; meanwhile everything else goes on.
  std::atomic<double> stalled_closed_after{-1};
  std::thread stalled([&] {
    asio::io_context io;
    auto s = connected(io, job.port);
    const auto start = std::chrono::steady_clock::now();
    asio::write(*s, asio::buffer(std::string("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthor")));
    char buf[256];
    beast::error_code ec;
    std::size_t got = 0;
    while (!ec) got += s->read_some(asio::buffer(buf), ec);
    if (ec != beast::error::timeout && got == 0)
      stalled_closed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });

  // 1. the token
  CHECK(http_request(job.port, "/metrics").status == 401);
  CHECK(http_request(job.port, "/metrics", {{"Authorization", "Bearer wrong"}}).status == 401);
  CHECK(http_request(job.port, "/?token=wrong").status == 401);
  CHECK(http_request(job.port, "/metrics", {kAuth}).status == 200);
  // 2. nothing outside the served files, however the path is spelled
  for (const char* path : {"/config.yaml", "/metrics.jsonl", "/../metrics.jsonl", "/static/../config.yaml",
                           "/static/%2e%2e/config.yaml", "/static/", "/static/nope.js", "/etc/passwd",
                           "/static//etc/passwd", "/api/", "/api/status/x"}) {
    CAPTURE(path);
    CHECK(http_request(job.port, path, {kAuth}).status == 404);
  }
  CHECK(http_request(job.port, "/static/page.js", {kAuth}).status == 200);
  // 3. headers over the server's 8 KiB bound
  CHECK(raw_request_status(job.port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(16 * 1024, 'a') +
                                         "\r\n\r\n") == 431);

  // 4. 500 connections open at once, then a request on each (after the ones above were
  // seen closed: the server takes 512 at most)
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  constexpr int kClients = 500;
  asio::io_context io;
  std::vector<std::unique_ptr<beast::tcp_stream>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(connected(io, job.port));
  std::vector<unsigned> status(kClients, 0);
  const std::size_t steps_before = step_rows(job.run / "metrics.jsonl");
  for (int i = 0; i < kClients; ++i) asio::co_spawn(io, ask(*clients[i], status[i]), asio::detached);
  io.run();
  const std::size_t steps_after = step_rows(job.run / "metrics.jsonl");
  CHECK(std::count(status.begin(), status.end(), 200u) == kClients);
  CHECK(steps_after < kSteps);  // the flood met a run still training
  MESSAGE("500 requests answered while the run went from step " << steps_before << " to " << steps_after);
  clients.clear();

  stalled.join();
  CHECK(stalled_closed_after >= 5.0);  // the timeout, not an error, closed it
  CHECK(stalled_closed_after < 30.0);

  const int exit_status = job.wait();
  CHECK(WIFEXITED(exit_status));
  CHECK(WEXITSTATUS(exit_status) == 0);
  const auto rows = count_rows(job.run / "metrics.jsonl");
  CHECK(rows.steps == kSteps);
  CHECK(rows.skipped == 0);
  CHECK(rows.recoveries == 0);
  CHECK(rows.summaries == 1);
}
