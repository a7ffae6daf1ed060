#pragma once
// A small HTTP/1.1 server on Boost.Beast for the status pages (/metrics, /api/status, /):
// GET and HEAD only, a handler that answers each request, and the token check of
// serve_auth.hpp in front of it.
//
// Threading: one Boost.Asio io thread owned by the server (as the rendezvous server's,
// transport/rendezvous/server.hpp) serves every connection with coroutines; the handler
// runs on it, so it must be quick and must not wait on the training. The constructor
// binds and starts the thread; the destructor closes every connection and joins it.
//
// Hostile or broken clients: a request header over max_header_bytes is answered 431, a
// body is refused (413), a client silent for io_timeout mid-request or slow to take a
// reply is dropped, and connections beyond max_connections are closed on accept. None of
// it reaches the handler.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor::watch {

/// The io thread's name (pthread_setname_np; at most 15 characters).
inline constexpr const char* kHttpThreadName = "conveyor-http";

struct HttpRequest {
  std::string method;  // GET or HEAD (others never reach the handler)
  std::string target;  // path and query, as sent
  std::string path;    // target without its query
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  /// Server-sent events (text/event-stream): when set, the connection stays open after
  /// `body`, and every event_period the server calls `next_event`, sending what it returns
  /// (a whole "data: ...\n\n" event) or nothing (nullopt) until the client leaves or the
  /// server stops.
  std::function<std::optional<std::string>()> next_event;
  std::chrono::milliseconds event_period{1000};
};

/// A whole reply: status, type and body.
inline HttpResponse reply(unsigned status, std::string content_type, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: a free port, see HttpServer::port()
  /// Non-empty: every request must show it (serve_auth.hpp), else 401.
  std::string token;
  std::chrono::milliseconds io_timeout{10'000};
  std::size_t max_header_bytes = 8 * 1024;
  std::size_t max_connections = 512;
  /// Receives one line per failed accept or handler error; default: stderr.
  std::function<void(std::string_view)> log;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  /// Binds and starts serving. Throws InputError naming the address when it cannot be
  /// bound ("cannot listen on 127.0.0.1:8080: Address already in use") or resolved.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound port (the free one picked when options.port was 0).
  std::uint16_t port() const;
  /// "http://HOST:PORT/" as bound (IPv6 hosts in brackets).
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::watch
