#include "transport/rendezvous/client.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "transport/rendezvous/clock_offset.hpp"
#include "transport/rendezvous/hmac.hpp"

namespace conveyor {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace rendezvous;

std::uint32_t to_wire_ms(milliseconds d) {
  return static_cast<std::uint32_t>(
      std::clamp<milliseconds::rep>(d.count(), 0, std::numeric_limits<std::uint32_t>::max()));
}

std::int64_t now_ns(auto clock_now) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_now.time_since_epoch()).count();
}

// Drawn once per process (again in a forked child): every client of this process sends
// it, so that the server can tell a second process claiming a rank from this process's
// own second connection.
std::string this_process_id() {
  static std::mutex mu;
  static pid_t drawn_in = -1;
  static std::string id;
  std::lock_guard lock(mu);
  if (drawn_in != ::getpid()) {
    std::random_device random;
    id = fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
    drawn_in = ::getpid();
  }
  return id;
}

std::string this_process_origin() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return fmt::format("host {}, pid {}", host[0] ? host : "unknown", ::getpid());
}

}  // namespace

namespace rendezvous {
Bytes to_bytes(std::string_view text) { return Bytes(text.begin(), text.end()); }
std::string to_text(std::span<const std::uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}
}  // namespace rendezvous

struct RendezvousClient::Impl {
  explicit Impl(RendezvousClientOptions options) : opt(std::move(options)) {
    if (opt.process.empty()) opt.process = this_process_id();
    if (opt.origin.empty()) opt.origin = this_process_origin();
  }

  // Runs one asynchronous operation on `io` until it completes or `deadline` passes; on
  // the deadline the socket is closed (which cancels the operation) and timed_out is
  // returned.
  template <class Start>
  boost::system::error_code run(Start start, Clock::time_point deadline) {
    bool done = false;
    boost::system::error_code result;
    io.restart();
    start([&](const boost::system::error_code& ec) {
      result = ec;
      done = true;
    });
    io.run_until(deadline);
    if (done) return result;
    boost::system::error_code ignored;
    socket.close(ignored);
    io.restart();
    io.run();  // lets the cancelled operation finish
    return asio::error::timed_out;
  }

  [[noreturn]] void fail(RendezvousErrc code, std::string message) {
    disconnect();
    throw RendezvousError(code, std::move(message));
  }

  [[noreturn]] void fail_io(const boost::system::error_code& ec, std::string_view doing) {
    if (ec == asio::error::timed_out)
      fail(RendezvousErrc::disconnected,
           fmt::format("rendezvous: no progress from {} while {}", target, doing));
    if (ec == asio::error::eof)
      fail(RendezvousErrc::disconnected,
           fmt::format("rendezvous: {} closed the connection while {}", target, doing));
    fail(RendezvousErrc::disconnected,
         fmt::format("rendezvous: connection to {} failed while {}: {}", target, doing, ec.message()));
  }

  void disconnect() {
    boost::system::error_code ignored;
    socket.close(ignored);
    connected = false;
  }

  void write_message(const Message& m, Clock::time_point deadline) {
    const Bytes frame = encode_frame(m);
    auto ec = run([&](auto done) {
      asio::async_write(socket, asio::buffer(frame),
                        [done](const boost::system::error_code& e, std::size_t) mutable { done(e); });
    }, deadline);
    if (ec) fail_io(ec, fmt::format("sending {}", type_name(static_cast<std::uint8_t>(type_of(m)))));
  }

  Message read_message(Clock::time_point deadline) {
    std::array<std::uint8_t, kLengthBytes> header{};
    auto read_into = [&](asio::mutable_buffer buffer) {
      return run([&](auto done) {
        asio::async_read(socket, buffer,
                         [done](const boost::system::error_code& e, std::size_t) mutable { done(e); });
      }, deadline);
    };
    if (auto ec = read_into(asio::buffer(header))) fail_io(ec, "waiting for a reply");
    const std::uint32_t length = decode_length(header);
    if (Status s = check_length(length, opt.max_frame_bytes); !s.ok())
      fail(RendezvousErrc::protocol, fmt::format("rendezvous: bad reply from {}: {}", target, s.message()));
    Bytes payload(length);
    if (auto ec = read_into(asio::buffer(payload))) fail_io(ec, "reading a reply");
    Message m;
    if (Status s = decode_payload(payload, &m); !s.ok())
      fail(RendezvousErrc::protocol, fmt::format("rendezvous: bad reply from {}: {}", target, s.message()));
    return m;
  }

  // The server's address now: the route's when there is one.
  StoreRoute::Address server() const {
    if (opt.route) return opt.route->address();
    return {opt.host, opt.port, 0};
  }

  // True when the route moved since this client connected.
  bool moved() const { return opt.route && opt.route->version() != connected_version; }

  // REQUIRES: mu held. Connects (retrying until connect_timeout) and authenticates.
  void connect() {
    disconnect();
    const StoreRoute::Address address = server();
    target = host_port(address.host, address.port);
    connected_version = address.version;
    const auto deadline = Clock::now() + opt.connect_timeout;
    milliseconds backoff(10);
    for (;;) {
      boost::system::error_code ec;
      tcp::resolver resolver(io);
      const auto endpoints = resolver.resolve(address.host, std::to_string(address.port), ec);
      if (!ec) {
        ec = asio::error::host_not_found;
        for (const auto& entry : endpoints) {
          disconnect();
          // At least a moment per attempt, so the last one reports a real error (refused)
          // rather than the deadline it started on.
          const auto now = Clock::now();
          const auto attempt_deadline =
              std::max(std::min(deadline, now + opt.io_timeout), now + milliseconds(100));
          ec = run([&](auto done) { socket.async_connect(entry.endpoint(), done); }, attempt_deadline);
          if (!ec) break;
        }
      }
      if (!ec) break;
      const auto now = Clock::now();
      if (now >= deadline)
        fail(RendezvousErrc::unreachable,
             fmt::format("rendezvous: cannot reach {} within {}: {}", target,
                         describe_duration(opt.connect_timeout), ec.message()));
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
      backoff = std::min(backoff * 2, milliseconds(250));
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    handshake();
    connected = true;
  }

  void handshake() {
    const auto deadline = Clock::now() + opt.io_timeout;
    Message m = read_message(deadline);
    const auto* challenge = std::get_if<Challenge>(&m);
    if (challenge == nullptr)
      fail(RendezvousErrc::protocol,
           fmt::format("rendezvous: {} opened with a {} frame, not a challenge", target,
                       type_name(static_cast<std::uint8_t>(type_of(m)))));
    const bool server_has_token = challenge->auth_required;
    Auth auth;
    if (!opt.token.empty()) {
      const Mac mac = hmac_sha256(opt.token, challenge->nonce);
      auth.mac.assign(mac.begin(), mac.end());
    }
    auth.process = opt.process;
    auth.origin = opt.origin;
    write_message(auth, deadline);
    m = read_message(deadline);
    if (const auto* refused = std::get_if<Refused>(&m))
      fail(RendezvousErrc::refused, fmt::format("rendezvous: refused: {}", refused->reason));
    if (!std::holds_alternative<Welcome>(m))
      fail(RendezvousErrc::protocol,
           fmt::format("rendezvous: {} answered the handshake with a {} frame", target,
                       type_name(static_cast<std::uint8_t>(type_of(m)))));
    // A server that asks for no token but welcomes one (an older one) is refused here:
    // a job whose processes disagree on authentication is misconfigured.
    if (!server_has_token && !opt.token.empty())
      fail(RendezvousErrc::refused,
           fmt::format("rendezvous: refused: the job tokens differ: this process has a job token, "
                       "the rendezvous server at {} has none",
                       target));
  }

  // True when the idle connection has something to read: the server closed it (idle
  // timeout, restart) or sent bytes nobody asked for. Either way it must be replaced.
  bool stale() {
    pollfd p{socket.native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  }

  // REQUIRES: mu held. One request, its reply; an error reply becomes RendezvousError.
  Message call(const Message& request, milliseconds server_wait = milliseconds(0)) {
    if (!connected || stale() || moved()) connect();
    const Bytes frame_size_probe = encode_frame(request);
    if (frame_size_probe.size() - kLengthBytes > opt.max_frame_bytes)
      throw std::invalid_argument(fmt::format(
          "rendezvous: a {} request of {} bytes exceeds the {}-byte frame limit",
          type_name(static_cast<std::uint8_t>(type_of(request))), frame_size_probe.size(),
          opt.max_frame_bytes));
    write_message(request, Clock::now() + opt.io_timeout);
    Message reply = read_message(Clock::now() + server_wait + opt.io_timeout);
    if (const auto* e = std::get_if<ErrorReply>(&reply))
      throw RendezvousError(e->code == RemoteErrc::timeout ? RendezvousErrc::timeout
                                                           : RendezvousErrc::invalid_request,
                            "rendezvous: " + e->message);
    return reply;
  }

  template <class T>
  T expect(Message reply, std::string_view what) {
    if (auto* r = std::get_if<T>(&reply)) return std::move(*r);
    fail(RendezvousErrc::protocol,
         fmt::format("rendezvous: {} answered {} with a {} frame", target, what,
                     type_name(static_cast<std::uint8_t>(type_of(reply)))));
  }

  std::uint32_t joined_rank(const char* what) const {
    if (!rank) throw std::logic_error(fmt::format("rendezvous: {}() before join()", what));
    return *rank;
  }

  RendezvousClientOptions opt;
  std::string target;  // "HOST:PORT" of the server connected to last (for messages)
  std::mutex mu;
  asio::io_context io{1};
  tcp::socket socket{io};
  bool connected = false;
  std::uint64_t connected_version = 0;  // the route's version when connected
  std::optional<std::uint32_t> rank;
};

RendezvousClient::RendezvousClient(RendezvousClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  std::lock_guard lock(impl_->mu);
  impl_->connect();
}

RendezvousClient::~RendezvousClient() = default;

void RendezvousClient::join(std::uint32_t rank, std::uint32_t world_size, milliseconds timeout) {
  std::lock_guard lock(impl_->mu);
  impl_->expect<OkReply>(impl_->call(JoinRequest{rank, world_size, to_wire_ms(timeout)}, timeout), "join");
  impl_->rank = rank;
}

void RendezvousClient::barrier(std::string_view name, milliseconds timeout) {
  std::lock_guard lock(impl_->mu);
  const auto rank = impl_->joined_rank("barrier");
  impl_->expect<OkReply>(
      impl_->call(BarrierRequest{rank, std::string(name), to_wire_ms(timeout)}, timeout), "barrier");
}

void RendezvousClient::set(std::string_view key, std::span<const std::uint8_t> value) {
  std::lock_guard lock(impl_->mu);
  impl_->expect<OkReply>(impl_->call(SetRequest{std::string(key), Bytes(value.begin(), value.end())}),
                         "set");
}

void RendezvousClient::set(std::string_view key, std::string_view value) {
  set(key, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(value.data()),
                                         value.size()));
}

std::optional<Bytes> RendezvousClient::get(std::string_view key) {
  std::lock_guard lock(impl_->mu);
  return impl_->expect<ValueReply>(impl_->call(GetRequest{std::string(key)}), "get").value;
}

Bytes RendezvousClient::wait(std::string_view key, milliseconds timeout) {
  std::lock_guard lock(impl_->mu);
  auto reply = impl_->expect<ValueReply>(
      impl_->call(WaitRequest{std::string(key), to_wire_ms(timeout)}, timeout), "wait");
  if (!reply.value)
    impl_->fail(RendezvousErrc::protocol,
                fmt::format("rendezvous: {} answered wait for \"{}\" without a value", impl_->target, key));
  return std::move(*reply.value);
}

void RendezvousClient::heartbeat() {
  std::lock_guard lock(impl_->mu);
  const auto rank = impl_->joined_rank("heartbeat");
  impl_->expect<OkReply>(impl_->call(HeartbeatRequest{rank}), "heartbeat");
}

std::vector<std::uint32_t> RendezvousClient::dead_ranks(milliseconds max_silence) {
  std::lock_guard lock(impl_->mu);
  return impl_->expect<RanksReply>(impl_->call(DeadRanksRequest{to_wire_ms(max_silence)}), "dead_ranks")
      .ranks;
}

ChangesReply RendezvousClient::follow(std::int64_t since_seq, milliseconds timeout) {
  std::lock_guard lock(impl_->mu);
  return impl_->expect<ChangesReply>(
      impl_->call(FollowRequest{since_seq, to_wire_ms(timeout)}, timeout), "follow");
}

ClockOffset RendezvousClient::clock_offset(int rounds) {
  if (rounds < 1) throw std::invalid_argument("rendezvous: clock_offset needs at least 1 round");
  std::lock_guard lock(impl_->mu);
  std::vector<ClockSample> steady, system;
  for (int i = 0; i < rounds; ++i) {
    const std::int64_t steady_send = now_ns(Clock::now());
    const std::int64_t system_send = now_ns(std::chrono::system_clock::now());
    const auto r = impl_->expect<ClockReply>(impl_->call(ClockProbe{}), "clock_probe");
    const std::int64_t steady_receive = now_ns(Clock::now());
    const std::int64_t system_receive = now_ns(std::chrono::system_clock::now());
    steady.push_back({steady_send, r.steady_receive_ns, r.steady_send_ns, steady_receive});
    system.push_back({system_send, r.system_receive_ns, r.system_send_ns, system_receive});
  }
  // The steady clock measures the round trip; the system offset comes from the same one.
  const std::size_t best = best_sample(steady);
  return {offset_of(steady[best]), offset_of(system[best]), round_trip(steady[best])};
}

std::optional<std::uint32_t> RendezvousClient::rank() const {
  std::lock_guard lock(impl_->mu);
  return impl_->rank;
}

}  // namespace conveyor
