// Peers that send what no RendezvousClient would: each is dropped on its own, with a log
// line, and the store keeps serving a normal client (one already connected and new ones).
// And a primary that answers a standby's follow with what no server would: the standby's
// mirror stops, saying why, and adopts nothing.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <string>
#include <thread>

#include "tests/transport/rendezvous/test_server.hpp"
#include "transport/rendezvous/frame.hpp"
#include "transport/rendezvous/hmac.hpp"
#include "transport/rendezvous/store_mirror.hpp"

using namespace conveyor;
using namespace conveyor::rendezvous;
using conveyor::testing::LogCapture;
using conveyor::testing::client_options;
using conveyor::testing::error_of;
using conveyor::testing::server_options;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// A raw loopback socket; every read is bounded by poll() so a test cannot hang.
class RawPeer {
 public:
  explicit RawPeer(std::uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  // The server's end of the first connection to `acceptor` within `within`.
  RawPeer(tcp::acceptor& acceptor, milliseconds within) : socket_(io_) {
    pollfd p{acceptor.native_handle(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, static_cast<int>(within.count())) > 0);
    acceptor.accept(socket_);
  }

  void send(const Bytes& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  void send(std::string_view text) { asio::write(socket_, asio::buffer(text.data(), text.size())); }
  void shutdown_send() { socket_.shutdown(tcp::socket::shutdown_send); }

  // Up to n bytes arriving before `within`; fewer when the server closed or was silent.
  Bytes receive(std::size_t n, milliseconds within) {
    Bytes out;
    const auto deadline = Clock::now() + within;
    while (out.size() < n) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      pollfd p{socket_.native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      std::uint8_t buf[512];
      const ssize_t got = ::recv(socket_.native_handle(), buf, std::min(sizeof buf, n - out.size()), 0);
      if (got <= 0) break;
      out.insert(out.end(), buf, buf + got);
    }
    return out;
  }

  Message receive_frame(milliseconds within) {
    const Bytes header = receive(kLengthBytes, within);
    REQUIRE(header.size() == kLengthBytes);
    const Bytes payload = receive(decode_length(std::span<const std::uint8_t, 4>(header.data(), 4)), within);
    Message m;
    REQUIRE(decode_payload(payload, &m).ok());
    return m;
  }

  // The whole handshake, as a well-behaved client would do it.
  void authenticate(std::string_view token) {
    const auto challenge = std::get<Challenge>(receive_frame(milliseconds(1000)));
    const Mac mac = hmac_sha256(token, challenge.nonce);
    send(encode_frame(Auth{Bytes(mac.begin(), mac.end())}));
    REQUIRE(std::holds_alternative<Welcome>(receive_frame(milliseconds(1000))));
  }

  // True once the server has closed the connection (after discarding what it sent).
  bool closed_by_server(milliseconds within) {
    const auto deadline = Clock::now() + within;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{socket_.native_handle(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      std::uint8_t buf[512];
      if (::recv(socket_.native_handle(), buf, sizeof buf, 0) <= 0) return true;
    }
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
};

// A normal client connected before the bad peer and one connected after both still work.
void check_still_serving(const RendezvousServer& server, RendezvousClient& before) {
  before.set("before", "1");
  RendezvousClient after(client_options(server));
  after.set("after", "2");
  CHECK(to_text(*after.get("before")) == "1");
  CHECK(to_text(*before.get("after")) == "2");
}

struct Fixture {
  LogCapture log;
  RendezvousServer server{server_options(log)};
  RendezvousClient normal{client_options(server)};
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "an oversized frame length is dropped at once and the store keeps serving") {
  RawPeer peer(server.port());
  peer.send(Bytes{0xF0, 0xFF, 0xFF, 0xFF});  // 0xFFFFFFF0
  const auto start = Clock::now();
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(Clock::now() - start < milliseconds(250));  // not by the 300 ms timeout
  CHECK(log.eventually_contains("frame length 4294967280 exceeds the 1048576-byte limit"));
  CHECK(server.dropped_connections() == 1);
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a frame cut short by a closed connection is dropped and logged") {
  RawPeer peer(server.port());
  peer.authenticate("job-token");
  Bytes frame = encode_frame(SetRequest{"key", Bytes(100, 7)});
  frame.resize(20);
  peer.send(frame);
  peer.shutdown_send();
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(log.eventually_contains("truncated frame body: connection closed after 16 of 112 bytes"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a frame that stops half-way on an open connection is dropped after the io timeout") {
  RawPeer peer(server.port());
  peer.authenticate("job-token");
  Bytes frame = encode_frame(SetRequest{"key", Bytes(100, 7)});
  frame.resize(20);
  peer.send(frame);
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(log.eventually_contains("silent for 300 ms while reading a frame body (16 of 112 bytes came)"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "garbage bytes are dropped without harming other clients") {
  {
    RawPeer http(server.port());  // "GET " reads as a 542 MB length
    http.send("GET / HTTP/1.1\r\nHost: rendezvous\r\n\r\n");
    CHECK(http.closed_by_server(milliseconds(2000)));
  }
  {
    RawPeer unknown(server.port());
    unknown.send(Bytes{2, 0, 0, 0, 0x7F, 0x00});
    CHECK(unknown.closed_by_server(milliseconds(2000)));
  }
  {
    RawPeer empty(server.port());
    empty.send(Bytes{0, 0, 0, 0});
    CHECK(empty.closed_by_server(milliseconds(2000)));
  }
  CHECK(log.eventually_contains("exceeds the 1048576-byte limit"));
  CHECK(log.eventually_contains("unknown frame type 0x7f"));
  CHECK(log.eventually_contains("empty frame"));
  CHECK(server.dropped_connections() == 3);
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "malformed fields after the handshake drop that connection") {
  RawPeer peer(server.port());
  peer.authenticate("job-token");
  // a set whose key announces 0x7FFFFFFF bytes inside a 10-byte frame
  peer.send(Bytes{10, 0, 0, 0, 0x12, 0xFF, 0xFF, 0xFF, 0x7F, 'k', 0, 0, 0, 0});
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(log.eventually_contains("malformed set frame"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a reply frame sent by a client drops that connection") {
  RawPeer peer(server.port());
  peer.authenticate("job-token");
  peer.send(encode_frame(OkReply{}));
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(log.eventually_contains("a client may not send a ok frame"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a request before the handshake drops that connection") {
  RawPeer peer(server.port());
  peer.send(encode_frame(JoinRequest{0, 1, 100}));
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(log.eventually_contains("expected an auth frame, got join"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a client that connects and sends nothing is dropped after the io timeout") {
  RawPeer peer(server.port());
  const auto start = Clock::now();
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(Clock::now() - start >= milliseconds(250));
  CHECK(log.eventually_contains("silent for 300 ms while reading a frame header (0 of 4 bytes came)"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a follow with a negative seq drops that connection") {
  RawPeer peer(server.port());
  peer.authenticate("job-token");
  peer.send(encode_frame(FollowRequest{-1, 100}));
  CHECK(peer.closed_by_server(milliseconds(2000)));
  CHECK(log.eventually_contains("malformed follow frame: since_seq -1 is negative"));
  check_still_serving(server, normal);
}

TEST_CASE_FIXTURE(Fixture, "a follow from beyond the store's seq is refused, naming both seqs") {
  normal.set("k", "v");  // seq 1
  CHECK(error_of([&] { normal.follow(99, milliseconds(100)); }) ==
        "rendezvous: follow from seq 99, but this store is at seq 1: the follower mirrored "
        "another store");
  check_still_serving(server, normal);
}

TEST_CASE("a primary answering with a malformed changes frame stops the mirror, which says why") {
  LogCapture log;
  auto options = server_options(log);
  options.follower = true;
  RendezvousServer follower(options);
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  StoreMirrorOptions mirror_options;
  mirror_options.primary.host = "127.0.0.1";
  mirror_options.primary.port = acceptor.local_endpoint().port();
  mirror_options.primary.io_timeout = milliseconds(10000);  // slack for a loaded machine
  mirror_options.poll = milliseconds(1000);
  mirror_options.log = log.sink();
  StoreMirror mirror(follower, mirror_options);

  RawPeer primary(acceptor, milliseconds(5000));
  primary.send(encode_frame(Challenge{false, {}}));
  REQUIRE(std::holds_alternative<Auth>(primary.receive_frame(milliseconds(2000))));
  primary.send(encode_frame(Welcome{}));
  const auto follow = std::get<FollowRequest>(primary.receive_frame(milliseconds(2000)));
  CHECK(follow.since_seq == 0);
  primary.send(encode_frame(ChangesReply{7, 2, {{5, "p", "w"}}, {{"k", Bytes{1}}}}));

  CHECK(log.eventually_contains(
      "malformed changes frame: joined rank 5 is out of range for world size 2", milliseconds(5000)));
  CHECK(log.contains("rendezvous mirror: stopped at seq 0: rendezvous: bad reply from 127.0.0.1:"));
  CHECK(mirror.last_error().find("malformed changes frame") != std::string::npos);
  CHECK(mirror.seq() == 0);
  CHECK(primary.closed_by_server(milliseconds(2000)));  // the mirror hung up, for good
  follower.promote();
  RendezvousClient reader(client_options(follower));
  CHECK(!reader.get("k"));
}
