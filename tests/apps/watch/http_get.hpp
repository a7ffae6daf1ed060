#pragma once
// A blocking HTTP/1.1 client on Boost.Beast for the status server's tests: one request
// to 127.0.0.1:PORT, the whole reply. Header-only; no doctest here.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::testing {

struct HttpReply {
  unsigned status = 0;
  std::string body;
  std::string content_type, set_cookie, www_authenticate, content_length;
};

inline HttpReply http_request(std::uint16_t port, const std::string& target,
                              const std::vector<std::pair<std::string, std::string>>& headers = {},
                              const std::string& method = "GET") {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));  // a hung server fails the test, not the suite
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) req.set(name, value);
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  if (method == "HEAD") parser.skip(true);
  http::read(stream, buffer, parser);
  const auto& res = parser.get();
  const auto field = [&](http::field f) { return std::string(res[f]); };
  HttpReply out{res.result_int(), res.body(), field(http::field::content_type), field(http::field::set_cookie),
                field(http::field::www_authenticate), field(http::field::content_length)};
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  return out;
}

/// Sends `raw` bytes as they are and returns the reply's status line's code (0: none).
inline unsigned raw_request_status(std::uint16_t port, const std::string& raw) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(stream, asio::buffer(raw));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(stream, buffer, res, ec);
  return ec ? 0 : res.result_int();
}

}  // namespace conveyor::testing
