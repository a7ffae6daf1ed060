// The status server's HTTP side with a handler of the test's own: the token check in front
// of it (401 without, 200 with, the cookie flow), methods, HEAD, oversized headers,
// server-sent events, and a clean stop with a client still connected.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "apps/watch/http_server.hpp"
#include "tests/apps/watch/http_get.hpp"

using namespace conveyor::watch;
using conveyor::testing::http_request;
using conveyor::testing::raw_request_status;

namespace {

HttpHandler echo_path() {
  return [](const HttpRequest& req) { return reply(200, "text/plain", "path " + req.path); };
}

HttpServerOptions quiet(HttpServerOptions o = {}) {
  o.log = [](std::string_view) {};
  return o;
}

}  // namespace

TEST_CASE("a loopback server on port 0 picks a port, names it in its URL and answers GET") {
  HttpServer server(quiet(), echo_path());
  REQUIRE(server.port() != 0);
  CHECK(server.url() == "http://127.0.0.1:" + std::to_string(server.port()) + "/");
  const auto r = http_request(server.port(), "/metrics?x=1");
  CHECK(r.status == 200);
  CHECK(r.body == "path /metrics");
  CHECK(r.content_type == "text/plain");
}

TEST_CASE("a server beyond loopback answers 401 without its token and 200 with it") {
  HttpServerOptions o = quiet();
  o.host = "0.0.0.0";
  o.token = "t0ken";
  HttpServer server(o, echo_path());
  const auto refused = http_request(server.port(), "/metrics");
  CHECK(refused.status == 401);
  CHECK(refused.www_authenticate == "Bearer");
  CHECK(refused.body.find("path") == std::string::npos);  // the handler was not asked
  CHECK(http_request(server.port(), "/metrics", {{"Authorization", "Bearer wrong"}}).status == 401);
  const auto bearer = http_request(server.port(), "/metrics", {{"Authorization", "Bearer t0ken"}});
  CHECK(bearer.status == 200);
  CHECK(bearer.body == "path /metrics");
  // A browser: the token in the URL once, then the cookie the reply set.
  const auto first = http_request(server.port(), "/?token=t0ken");
  CHECK(first.status == 200);
  REQUIRE_FALSE(first.set_cookie.empty());
  const std::string cookie = first.set_cookie.substr(0, first.set_cookie.find(';'));
  CHECK(http_request(server.port(), "/api/status", {{"Cookie", cookie}}).status == 200);
}

TEST_CASE("the server takes GET and HEAD only, and HEAD has the GET's length and no body") {
  HttpServer server(quiet(), echo_path());
  CHECK(http_request(server.port(), "/", {}, "POST").status == 405);
  const auto head = http_request(server.port(), "/abc", {}, "HEAD");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(head.content_length == std::to_string(std::string("path /abc").size()));
}

TEST_CASE("a request header over the bound is answered 431 without reaching the handler") {
  std::atomic<int> calls{0};
  HttpServerOptions o = quiet();
  o.max_header_bytes = 1024;
  HttpServer server(o, [&](const HttpRequest&) {
    ++calls;
    return reply(200, "text/plain", "ok");
  });
  const std::string raw = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(3000, 'a') + "\r\n\r\n";
  CHECK(raw_request_status(server.port(), raw) == 431);
  CHECK(raw_request_status(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello") == 413);
  CHECK(calls == 0);
  CHECK(raw_request_status(server.port(), "NOT HTTP\r\n\r\n") == 400);
}

TEST_CASE("a handler that throws is a 500 naming the error and the server goes on") {
  HttpServer server(quiet(), [](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/boom") throw std::runtime_error("boom happened");
    return reply(200, "text/plain", "fine");
  });
  const auto r = http_request(server.port(), "/boom");
  CHECK(r.status == 500);
  CHECK(r.body.find("boom happened") != std::string::npos);
  CHECK(http_request(server.port(), "/").status == 200);
}

TEST_CASE("server-sent events send the first event, then each new one, and stop with the server") {
  namespace asio = boost::asio;
  auto server = std::make_unique<HttpServer>(quiet(), [](const HttpRequest&) {
    HttpResponse r = reply(200, "text/event-stream", "data: 0\n\n");
    auto n = std::make_shared<int>(0);
    r.event_period = std::chrono::milliseconds(10);
    r.next_event = [n]() -> std::optional<std::string> {
      if (*n >= 2) return std::nullopt;
      return "data: " + std::to_string(++*n) + "\n\n";
    };
    return r;
  });
  asio::io_context io;
  boost::beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server->port()));
  asio::write(stream, asio::buffer(std::string("GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")));
  std::string got;
  char buf[512];
  while (got.find("data: 2\n\n") == std::string::npos) {
    boost::beast::error_code ec;
    const auto n = stream.read_some(asio::buffer(buf), ec);
    REQUIRE_FALSE(ec);
    got.append(buf, n);
  }
  CHECK(got.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(got.find("Content-Type: text/event-stream\r\n") != std::string::npos);
  CHECK(got.find("data: 0\n\ndata: 1\n\ndata: 2\n\n") != std::string::npos);
  server.reset();  // with the client still connected: it must not hang
  boost::beast::error_code ec;
  while (!ec) (void)stream.read_some(asio::buffer(buf), ec);
  CHECK(ec);  // the server closed the stream
}

TEST_CASE("an address that cannot be bound is an error naming it") {
  HttpServer first(quiet(), echo_path());
  HttpServerOptions o = quiet();
  o.port = first.port();
  // reuse_address lets a second bind of a listening port fail on Linux all the same.
  const std::string where = "cannot listen on 127.0.0.1:" + std::to_string(first.port());
  CHECK_THROWS_WITH_AS(HttpServer(o, echo_path()), doctest::Contains(where.c_str()), std::exception);
}

namespace {

// A connected client stream with a 10 s bound on everything it does.
std::unique_ptr<boost::beast::tcp_stream> connect_to(boost::asio::io_context& io, std::uint16_t port) {
  auto s = std::make_unique<boost::beast::tcp_stream>(io);
  s->expires_after(std::chrono::seconds(10));
  s->connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  return s;
}

// Reads until the server closes the connection; what came before.
std::string read_to_close(boost::beast::tcp_stream& s) {
  std::string got;
  char buf[1024];
  boost::beast::error_code ec;
  while (!ec) got.append(buf, s.read_some(boost::asio::buffer(buf), ec));
  CHECK(ec != boost::beast::error::timeout);  // the server closed it, not our bound
  return got;
}

}  // namespace

TEST_CASE("a client silent or stalled mid-request is dropped after the io timeout") {
  HttpServerOptions o = quiet();
  o.io_timeout = std::chrono::milliseconds(100);
  HttpServer server(o, echo_path());
  boost::asio::io_context io;
  const auto start = std::chrono::steady_clock::now();
  auto silent = connect_to(io, server.port());
  auto stalled = connect_to(io, server.port());
  boost::asio::write(*stalled, boost::asio::buffer(std::string("GET / HTTP/1.1\r\nHo")));
  CHECK(read_to_close(*silent).empty());
  CHECK(read_to_close(*stalled).empty());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(http_request(server.port(), "/").status == 200);  // and it serves the next client
}

TEST_CASE("connections beyond max_connections are closed at once and the others served") {
  HttpServerOptions o = quiet();
  o.max_connections = 2;
  HttpServer server(o, echo_path());
  boost::asio::io_context io;
  auto first = connect_to(io, server.port());
  auto second = connect_to(io, server.port());
  // The two are sessions once a request on each was answered.
  for (auto* s : {first.get(), second.get()}) {
    boost::asio::write(*s, boost::asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
    boost::beast::flat_buffer buffer;
    boost::beast::http::response<boost::beast::http::string_body> res;
    boost::beast::http::read(*s, buffer, res);
    CHECK(res.result_int() == 200);
  }
  auto third = connect_to(io, server.port());
  CHECK(read_to_close(*third).empty());
  first.reset();  // a place comes free
  second.reset();
  for (int i = 0; i < 200; ++i) {  // the server notices the closes on its own thread
    try {
      if (http_request(server.port(), "/").status == 200) break;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(http_request(server.port(), "/").status == 200);
}

TEST_CASE("a hundred clients at once are all answered") {
  HttpServer server(quiet(), echo_path());
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 100; ++i)
    clients.emplace_back([&, i] {
      try {
        const auto r = http_request(server.port(), "/c" + std::to_string(i));
        if (r.status == 200 && r.body == "path /c" + std::to_string(i)) ++ok;
      } catch (const std::exception&) {
      }
    });
  for (auto& t : clients) t.join();
  CHECK(ok == 100);
}
