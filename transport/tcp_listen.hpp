#pragma once
// Listening on a TCP address with Boost.Asio, as conveyor's servers do (the rendezvous
// store, transport/rendezvous/server.cpp; the status server, apps/watch/http_server.cpp):
// the address from a literal or a name, then socket, bind and listen, each step named when
// it fails so the caller's message says which. Header-only: a server that links no other
// transport code includes it alone.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace conveyor {

/// `host` as an address: a literal, else the first address its name resolves to on `io`.
/// nullopt when neither, with `ec` set (or clear, when the name resolved to nothing).
inline std::optional<boost::asio::ip::address> listen_address(boost::asio::io_context& io,
                                                              const std::string& host,
                                                              std::uint16_t port,
                                                              boost::system::error_code& ec) {
  boost::asio::ip::address address = boost::asio::ip::make_address(host, ec);
  if (!ec) return address;
  boost::asio::ip::tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) return std::nullopt;
  return results.begin()->endpoint().address();
}

/// Opens `acceptor` on `endpoint` (reuse_address: a restart during TIME_WAIT), binds and
/// listens. nullptr when listening; else the step that failed ("socket", "bind", "listen"),
/// with `ec` saying why.
inline const char* open_listener(boost::asio::ip::tcp::acceptor& acceptor,
                                 const boost::asio::ip::tcp::endpoint& endpoint,
                                 boost::system::error_code& ec) {
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return "socket";
  acceptor.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (ec) return "bind";
  acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) return "listen";
  return nullptr;
}

}  // namespace conveyor
