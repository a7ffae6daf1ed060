#include "apps/watch/http_server.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <pthread.h>

#include <set>
#include <thread>

#include "apps/watch/serve_auth.hpp"
#include "kernels/common/error.hpp"
#include "kernels/common/finally.hpp"
#include "transport/tcp_listen.hpp"

namespace conveyor::watch {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kAwait = asio::use_awaitable;

std::string host_port_text(const tcp::endpoint& ep) {
  const auto a = ep.address();
  return a.is_v6() ? fmt::format("[{}]:{}", a.to_string(), ep.port()) : fmt::format("{}:{}", a.to_string(), ep.port());
}

// One client connection; owned by its session coroutine, listed in Impl::live while it runs.
struct Connection {
  explicit Connection(tcp::socket socket) : stream(std::move(socket)), timer(stream.get_executor()) {}
  beast::tcp_stream stream;
  asio::steady_timer timer;  // between server-sent events
};


}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions options, HttpHandler h) : opt(std::move(options)), handler(std::move(h)) {}
  ~Impl() {
    if (thread.joinable()) {
      asio::post(io, [this] { stop_all(); });
      thread.join();
    }
  }

  void start() {
    boost::system::error_code ec;
    const auto address = listen_address(io, opt.host, opt.port, ec);
    if (!address)
      throw InputError(fmt::format("cannot resolve the address {} to listen on: {}", opt.host,
                                   ec ? ec.message() : "no address"));
    const tcp::endpoint endpoint(*address, opt.port);
    const auto fail = [&](const char* step) {
      return InputError(fmt::format("cannot listen on {}: {} ({})", host_port_text(endpoint), ec.message(), step));
    };
    if (const char* step = open_listener(acceptor, endpoint, ec)) throw fail(step);
    bound = acceptor.local_endpoint();
    spawn(accept_loop());
    thread = std::thread([this] {
      // Named, so that `top -H` and `bench serve` (its CPU time) can tell it from the training's.
      pthread_setname_np(pthread_self(), kHttpThreadName);
      io.run();
    });
  }

  void log(std::string_view line) const {
    if (opt.log)
      opt.log(line);
    else
      fmt::print(stderr, "{}\n", line);
  }

  // io thread only from here on.

  void spawn(asio::awaitable<void> task) {
    asio::co_spawn(io, std::move(task), [this](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log(fmt::format("status server: a connection failed: {}", ex.what()));
      }
    });
  }

  void stop_all() {
    stopping = true;
    boost::system::error_code ignored;
    acceptor.close(ignored);
    for (Connection* c : live) {
      c->stream.close();
      c->timer.cancel();
    }
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket(io);
      boost::system::error_code ec;
      co_await acceptor.async_accept(socket, asio::redirect_error(kAwait, ec));
      if (stopping) co_return;
      if (ec) {  // out of file descriptors, say: back off, keep serving
        log(fmt::format("status server: accept failed: {}", ec.message()));
        asio::steady_timer pause(io, std::chrono::milliseconds(50));
        co_await pause.async_wait(asio::redirect_error(kAwait, ec));
        continue;
      }
      if (live.size() >= opt.max_connections) {
        socket.close(ec);  // a flood must not exhaust descriptors the training needs
        continue;
      }
      spawn(session(std::make_unique<Connection>(std::move(socket))));
    }
  }

  HttpResponse answer(const http::request<http::empty_body>& req) {
    HttpRequest r{std::string(req.method_string()), std::string(req.target()), ""};
    r.path = std::string(target_path(r.target));
    const auto header = [&](http::field f) {
      const auto v = req[f];
      return std::string_view(v.data(), v.size());
    };
    const auto auth = authorize(opt.token, r.target, header(http::field::authorization), header(http::field::cookie));
    if (!auth.allowed) {
      HttpResponse res = reply(401, "text/plain; charset=utf-8",
                               "401 unauthorized: this server needs its token (serve.token or CONVEYOR_SERVE_TOKEN): an "
                               "Authorization: Bearer header, or ?token= once in a browser\n");
      res.headers.emplace_back("WWW-Authenticate", "Bearer");
      return res;
    }
    HttpResponse res;
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res = reply(405, "text/plain; charset=utf-8", "405 method not allowed: GET or HEAD\n");
      res.headers.emplace_back("Allow", "GET, HEAD");
    } else {
      try {
        res = handler(r);
      } catch (const std::exception& e) {
        log(fmt::format("status server: {} {}: {}", r.method, r.path, e.what()));
        res = reply(500, "text/plain; charset=utf-8", fmt::format("500 internal error: {}\n", e.what()));
      }
    }
    if (auth.set_cookie) res.headers.emplace_back("Set-Cookie", *auth.set_cookie);
    return res;
  }

  // A reply to a request that never reached the handler; the connection closes after it.
  asio::awaitable<void> refuse(Connection& c, http::status status, std::string_view why) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.body() = fmt::format("{} {}\n", static_cast<unsigned>(status), why);
    res.keep_alive(false);
    res.prepare_payload();
    c.stream.expires_after(opt.io_timeout);
    boost::system::error_code ec;
    co_await http::async_write(c.stream, res, asio::redirect_error(kAwait, ec));
  }

  asio::awaitable<void> session(std::unique_ptr<Connection> owned) {
    Connection& c = *owned;
    live.insert(&c);
    Finally unlist{[&] { live.erase(&c); }};
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::empty_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(opt.max_header_bytes));
      c.stream.expires_after(opt.io_timeout);
      boost::system::error_code ec;
      co_await http::async_read(c.stream, buffer, parser, asio::redirect_error(kAwait, ec));
      if (stopping) co_return;
      if (ec == http::error::header_limit) co_return co_await refuse(c, http::status::request_header_fields_too_large,
                                                                     "request header fields too large");
      if (ec == http::error::unexpected_body || ec == http::error::body_limit)
        co_return co_await refuse(c, http::status::payload_too_large, "this server takes no request body");
      if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::eof ||
          ec == asio::error::connection_reset || ec == asio::error::operation_aborted)
        co_return;
      if (ec) co_return co_await refuse(c, http::status::bad_request, "bad request");
      const auto& req = parser.get();
      HttpResponse r = answer(req);
      if (r.next_event && req.method() == http::verb::get) co_return co_await stream_events(c, std::move(r));
      http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
      res.set(http::field::server, "conveyor");
      res.set(http::field::content_type, r.content_type);
      res.set(http::field::cache_control, "no-store");
      for (const auto& [name, value] : r.headers) res.set(name, value);
      res.keep_alive(req.keep_alive());
      res.body() = std::move(r.body);
      res.prepare_payload();
      if (req.method() == http::verb::head) res.body().clear();  // Content-Length stays the GET's
      c.stream.expires_after(opt.io_timeout);
      co_await http::async_write(c.stream, res, asio::redirect_error(kAwait, ec));
      if (ec || !res.keep_alive()) break;
    }
    boost::system::error_code ignored;
    c.stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // text/event-stream: the header and the first body, then each new event, until the
  // client goes (a failed write) or the server stops.
  asio::awaitable<void> stream_events(Connection& c, HttpResponse r) {
    std::string head = "HTTP/1.1 200 OK\r\nServer: conveyor\r\nContent-Type: text/event-stream\r\n"
                       "Cache-Control: no-store\r\nConnection: close\r\n";
    for (const auto& [name, value] : r.headers) head += name + ": " + value + "\r\n";
    std::string text = head + "\r\n" + r.body;
    boost::system::error_code ec;
    while (!stopping) {
      if (!text.empty()) {
        c.stream.expires_after(opt.io_timeout);  // a client that stops reading is dropped
        co_await asio::async_write(c.stream, asio::buffer(text), asio::redirect_error(kAwait, ec));
        if (ec) co_return;
        text.clear();
      }
      c.timer.expires_after(r.event_period);
      co_await c.timer.async_wait(asio::redirect_error(kAwait, ec));
      if (stopping) co_return;
      try {
        if (auto event = r.next_event()) text = std::move(*event);
      } catch (const std::exception& e) {
        log(fmt::format("status server: events: {}", e.what()));
        co_return;
      }
    }
  }

  HttpServerOptions opt;
  HttpHandler handler;
  std::set<Connection*> live;  // io thread only
  bool stopping = false;       // io thread only
  tcp::endpoint bound;
  asio::io_context io{1};  // after the set: coroutine frames die with it
  tcp::acceptor acceptor{io};
  std::thread thread;
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {
  impl_->start();
}

HttpServer::~HttpServer() = default;

std::uint16_t HttpServer::port() const { return impl_->bound.port(); }

std::string HttpServer::url() const {
  // A wildcard bind is reached through any of the host's addresses: name the host.
  if (impl_->bound.address().is_unspecified())
    return fmt::format("http://{}:{}/", asio::ip::host_name(), impl_->bound.port());
  return "http://" + host_port_text(impl_->bound) + "/";
}

}  // namespace conveyor::watch
