#include "transport/rendezvous/server.hpp"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <poll.h>
#include <cstdio>
#include <exception>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "transport/rendezvous/hmac.hpp"
#include "transport/rendezvous/log_throttle.hpp"
#include "transport/rendezvous/store.hpp"
#include "kernels/common/finally.hpp"
#include "transport/tcp_listen.hpp"

namespace conveyor {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace rendezvous;

constexpr auto kAwait = asio::use_awaitable;

std::string endpoint_text(const tcp::endpoint& ep) {
  return host_port(ep.address().to_string(), ep.port());
}

// What a peer sent to name itself, made safe for a log line: printable ASCII, bounded.
std::string printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  for (char ch : text.substr(0, max_chars)) out += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
  return out;
}

milliseconds to_ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d); }

std::int64_t ns_since_epoch(auto time_point) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time_point.time_since_epoch()).count();
}

// One client connection. Owned by its serve() coroutine (and the watchdog's copy).
struct Connection {
  explicit Connection(asio::io_context& io) : socket(io), watchdog(io), waiter(io) {}

  // The watchdog closes the socket once `deadline` passes; moving the deadline wakes it
  // so it re-arms (a shorter deadline must not wait for the older, longer one).
  void set_deadline(Clock::duration from_now) {
    deadline = Clock::now() + from_now;
    limit = to_ms(from_now);
    watchdog.cancel();
  }

  tcp::socket socket;
  asio::steady_timer watchdog;
  asio::steady_timer waiter;  // parks join/barrier/wait until the store changes
  Clock::time_point deadline = Clock::now();
  milliseconds limit{0};
  bool timed_out = false;
  std::string peer = "unknown peer";
  std::string process;  // from its auth frame: the same on every connection of one process
  std::string origin;   // "host gpu7, pid 4242"; may be empty

  /// "127.0.0.1:40312 (host gpu7, pid 4242)".
  std::string where() const { return origin.empty() ? peer : fmt::format("{} ({})", peer, origin); }
  /// True when the peer has closed its end (or the connection broke), whether or not a
  /// read has noticed yet: a join parked in wait_until reads nothing.
  bool hung_up() {
    pollfd p{socket.native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
  }
};

// How a client's job token compares with the server's (neither is ever printed).
enum class TokenMatch { same, differ, server_only, client_only };

TokenMatch match_tokens(const std::string& server_token, const Nonce& nonce, const Bytes& mac) {
  if (server_token.empty()) return mac.empty() ? TokenMatch::same : TokenMatch::client_only;
  if (mac.empty()) return TokenMatch::server_only;
  return equal_in_constant_time(hmac_sha256(server_token, nonce), mac) ? TokenMatch::same
                                                                        : TokenMatch::differ;
}

// The refusal's reason as the client reads it ("this process" is the client) or as the
// server's log says it.
std::string refusal_text(TokenMatch m, bool for_client) {
  const char* client = for_client ? "this process" : "the client";
  const char* server = for_client ? "the rendezvous server" : "the server";
  switch (m) {
    case TokenMatch::differ: return "wrong job token: the job tokens differ";
    case TokenMatch::server_only:
      return fmt::format("the job tokens differ: {} has a job token, {} has none", server, client);
    case TokenMatch::client_only:
      return fmt::format("the job tokens differ: {} has a job token, {} has none", client, server);
    case TokenMatch::same: break;
  }
  return "";
}

struct ReadResult {
  enum Kind { frame, closed, failed } kind = frame;
  std::string why;
};


constexpr Clock::duration kNoDeadline = std::chrono::hours(24);  // re-armed when reached
constexpr Clock::duration kFailureDrain = std::chrono::seconds(2);  // ~Impl after a store failure

}  // namespace

struct RendezvousServer::Impl {
  explicit Impl(RendezvousServerOptions options)
      : opt(std::move(options)),
        store(opt.follower),
        throttle("dropped or refused connections", std::max<std::size_t>(opt.log_burst, 1),
                 std::max(opt.log_window, milliseconds(1))) {}
  ~Impl() {
    if (thread.joinable()) {
      // After a store failure (ranks started with other world sizes), the ranks parked in a
      // join, barrier or wait are being answered with it (notify() woke them): let those
      // replies go out before the sockets close, or a rank that joined first sees only a
      // closed connection, not why the job cannot start. Bounded: a stuck peer costs at
      // most kFailureDrain.
      if (store.failure()) {
        const auto deadline = Clock::now() + kFailureDrain;
        while (answering.load() > 0 && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      asio::post(io, [this] { stop_all(); });
      thread.join();
    }
    if (auto summary = throttle.flush(Clock::now(), /*force=*/true)) log(*summary);
  }

  void start() {
    boost::system::error_code ec;
    const auto address = listen_address(io, opt.host, opt.port, ec);
    if (!address)
      throw RendezvousError(RendezvousErrc::unreachable,
                            fmt::format("rendezvous: cannot resolve listen address {}: {}",
                                        opt.host, ec ? ec.message() : "no address"));
    const tcp::endpoint endpoint(*address, opt.port);
    if (opt.token.empty() && address->is_unspecified())
      throw std::invalid_argument(fmt::format(
          "rendezvous: refusing to listen on {} without a job token; set a token or give "
          "the address of one interface",
          endpoint_text(endpoint)));
    auto fail = [&](const char* step) {
      throw RendezvousError(ec == boost::system::errc::address_in_use ? RendezvousErrc::address_in_use
                                                                       : RendezvousErrc::unreachable,
                            fmt::format("rendezvous: cannot listen on {}: {} ({})",
                                        endpoint_text(endpoint), ec.message(), step));
    };
    if (const char* step = open_listener(acceptor, endpoint, ec)) fail(step);
    bound = endpoint_text(acceptor.local_endpoint());
    port = acceptor.local_endpoint().port();
    if (opt.token.empty())
      log(fmt::format("rendezvous: warning: no job token; anyone who can reach {} can join "
                      "this job",
                      bound));
    spawn(accept_loop(), "accept loop");
    spawn(flush_log_every_window(), "log flush");
    thread = std::thread([this] { io.run(); });
  }

  void log(std::string_view line) {
    if (opt.log)
      opt.log(line);
    else
      fmt::print(stderr, "{}\n", line);
  }

  // io thread only from here on.

  // A line about one connection: through the throttle, so that thousands of them (idle
  // connections, a scan, a flood of wrong tokens) cannot flood the log.
  void log_connection_event(std::string line) {
    for (const auto& l : throttle.add(std::move(line), Clock::now())) log(l);
  }

  // Writes the throttle's summary of a window once it is over, even if no line follows.
  asio::awaitable<void> flush_log_every_window() {
    while (!stopping) {
      log_timer.expires_after(std::max(opt.log_window, milliseconds(1)));
      boost::system::error_code ec;
      co_await log_timer.async_wait(asio::redirect_error(kAwait, ec));
      if (auto summary = throttle.flush(Clock::now())) log(*summary);
    }
  }

  // A refusal worth telling a rank that then times out waiting for the one refused.
  void note_refusal(std::string what) {
    ++refusals;
    last_refusal = std::move(what);
  }
  std::string refusals_note() const {
    if (refusals == 0) return "";
    return fmt::format(" (meanwhile {} refused, the last: {})",
                       refusals == 1 ? std::string("1 connection was") : fmt::format("{} connections were", refusals),
                       last_refusal);
  }

  // True while some connection of `process` is open: that process is still there.
  bool process_connected(const std::string& process) {
    for (Connection* c : live)
      if (c->process == process && c->socket.is_open() && !c->hung_up()) return true;
    return false;
  }

  void spawn(asio::awaitable<void> task, std::string what) {
    asio::co_spawn(io, std::move(task), [this, what = std::move(what)](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log(fmt::format("rendezvous: {} failed: {}", what, ex.what()));
      }
    });
  }

  void stop_all() {
    stopping = true;
    boost::system::error_code ignored;
    acceptor.close(ignored);
    log_timer.cancel();
    for (Connection* c : live) {
      c->socket.close(ignored);
      c->watchdog.cancel();
      c->waiter.cancel();
    }
  }

  void drop(Connection& c, std::string_view why) {
    ++dropped;
    log_connection_event(fmt::format("rendezvous: dropped {}: {}", c.where(), why));
  }

  // Wakes every parked join/barrier/wait so it re-checks its condition.
  void notify() {
    for (Connection* c : waiting) c->waiter.cancel();
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto c = std::make_shared<Connection>(io);
      boost::system::error_code ec;
      co_await acceptor.async_accept(c->socket, asio::redirect_error(kAwait, ec));
      if (stopping) co_return;
      if (ec) {  // e.g. out of file descriptors: say so, back off, keep serving
        log_connection_event(fmt::format("rendezvous: accept on {} failed: {}", bound, ec.message()));
        asio::steady_timer pause(io, milliseconds(50));
        co_await pause.async_wait(asio::redirect_error(kAwait, ec));
        continue;
      }
      spawn(serve(std::move(c)), "connection");
    }
  }

  asio::awaitable<void> watch(std::shared_ptr<Connection> c) {
    while (c->socket.is_open()) {
      if (Clock::now() >= c->deadline) {
        c->timed_out = true;
        boost::system::error_code ignored;
        c->socket.close(ignored);
        break;
      }
      c->watchdog.expires_at(c->deadline);
      boost::system::error_code ec;
      co_await c->watchdog.async_wait(asio::redirect_error(kAwait, ec));
    }
  }

  ReadResult read_failure(const Connection& c, const boost::system::error_code& ec,
                          std::size_t got, std::size_t wanted, std::string_view what) {
    if (c.timed_out)
      return {ReadResult::failed,
              fmt::format("silent for {} while reading a {} ({} of {} bytes came)",
                          describe_duration(c.limit), what, got, wanted)};
    if (ec == asio::error::eof && got == 0 && what == "frame header") return {ReadResult::closed, "closed"};
    if (ec == asio::error::eof)
      return {ReadResult::failed, fmt::format("truncated {}: connection closed after {} of {} bytes",
                                              what, got, wanted)};
    return {ReadResult::failed, fmt::format("reading a {}: {}", what, ec.message())};
  }

  // Reads one frame. `first_wait` bounds the wait for its first bytes; the rest must
  // follow within io_timeout. The announced length is checked before any allocation.
  asio::awaitable<ReadResult> read(Connection& c, Clock::duration first_wait, Message* out) {
    std::array<std::uint8_t, kLengthBytes> header{};
    boost::system::error_code ec;
    c.set_deadline(first_wait);
    std::size_t got = co_await asio::async_read(c.socket, asio::buffer(header),
                                                asio::redirect_error(kAwait, ec));
    if (ec) co_return read_failure(c, ec, got, header.size(), "frame header");
    const std::uint32_t length = decode_length(header);
    if (Status s = check_length(length, opt.max_frame_bytes); !s.ok())
      co_return ReadResult{ReadResult::failed, s.message()};
    c.set_deadline(opt.io_timeout);
    Bytes payload(length);
    got = co_await asio::async_read(c.socket, asio::buffer(payload), asio::redirect_error(kAwait, ec));
    if (ec) co_return read_failure(c, ec, got, payload.size(), "frame body");
    if (Status s = decode_payload(payload, out); !s.ok())
      co_return ReadResult{ReadResult::failed, s.message()};
    co_return ReadResult{};
  }

  // GCC 12 destroys non-trivial temporaries inside a co_await expression twice: callers
  // pass named objects (messages, conditions) to these coroutines, never temporaries.
  asio::awaitable<bool> write(Connection& c, const Message& m) {
    const Bytes frame = encode_frame(m);
    c.set_deadline(opt.io_timeout);
    boost::system::error_code ec;
    co_await asio::async_write(c.socket, asio::buffer(frame), asio::redirect_error(kAwait, ec));
    if (ec) {
      if (!stopping)
        drop(c, c.timed_out ? fmt::format("did not take its {} reply within {}",
                                          type_name(static_cast<std::uint8_t>(type_of(m))),
                                          describe_duration(c.limit))
                            : fmt::format("writing a reply: {}", ec.message()));
      co_return false;
    }
    co_return true;
  }

  // Parks the connection's request until cond() holds (true) or `limit` passes (false).
  asio::awaitable<bool> wait_until(Connection& c, milliseconds limit,
                                   const std::function<bool()>& cond) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      if (cond()) co_return true;
      if (stopping || !c.socket.is_open() || Clock::now() >= deadline) co_return false;
      c.waiter.expires_at(deadline);
      waiting.insert(&c);
      boost::system::error_code ec;
      co_await c.waiter.async_wait(asio::redirect_error(kAwait, ec));
      waiting.erase(&c);
    }
  }

  static Message invalid(const Status& s) {
    return ErrorReply{RemoteErrc::invalid_request, s.message()};
  }

  // A standby answers follow requests only; any other waits here for promote(). Empty
  // once it may be served; else the error to answer.
  asio::awaitable<std::optional<Message>> await_promotion(Connection& c, const Message& request) {
    if (std::holds_alternative<FollowRequest>(request) || !store.following())
      co_return std::nullopt;
    const std::function<bool()> promoted = [this] { return !store.following(); };
    if (co_await wait_until(c, opt.io_timeout, promoted)) co_return std::nullopt;
    co_return ErrorReply{
        RemoteErrc::timeout,
        fmt::format("{} is a standby rendezvous server and was not promoted within {}", bound,
                    describe_duration(opt.io_timeout))};
  }

  // What a parked join, barrier or wait answers once the store has failed (the job cannot
  // start). REQUIRES: store.failure().
  Message failed() const { return ErrorReply{RemoteErrc::invalid_request, *store.failure()}; }

  asio::awaitable<Message> handle(Connection& c, Message& request) {
    const std::int64_t steady_received = ns_since_epoch(Clock::now());
    const std::int64_t system_received = ns_since_epoch(std::chrono::system_clock::now());

    if (auto* j = std::get_if<JoinRequest>(&request)) {
      const Joiner joiner{j->rank, j->world_size, c.process, c.where()};
      const RendezvousStore::ProcessAlive alive = [this](const std::string& p) { return process_connected(p); };
      const bool failed_before = store.failure().has_value();
      if (Status s = store.join(joiner, Clock::now(), alive); !s.ok()) {
        // A failure is logged once (here, by the join that caused it); a refusal each time.
        if (!failed_before) {
          log_connection_event("rendezvous: " + s.message());
          if (!store.failure()) note_refusal(s.message());
        }
        notify();  // a failure ends every parked join
        co_return invalid(s);
      }
      notify();
      const milliseconds limit(j->timeout_ms);
      const std::function<bool()> done = [this] { return store.all_joined() || store.failure(); };
      if (co_await wait_until(c, limit, done)) {
        if (store.failure()) co_return failed();
        co_return OkReply{};
      }
      const auto missing = store.missing_ranks();
      co_return ErrorReply{RemoteErrc::timeout,
                           fmt::format("timed out after {} waiting for {} to join{}", describe_duration(limit),
                                       describe_ranks(missing), refusals_note())};
    }
    if (auto* b = std::get_if<BarrierRequest>(&request)) {
      std::uint64_t generation = 0;
      if (Status s = store.arrive(b->name, b->rank, &generation); !s.ok()) co_return invalid(s);
      notify();
      const milliseconds limit(b->timeout_ms);
      const std::string& name = b->name;
      const std::function<bool()> passed = [&] { return store.passed(name, generation) || store.failure(); };
      if (co_await wait_until(c, limit, passed)) {
        if (store.passed(name, generation)) co_return OkReply{};
        store.leave(name, b->rank, generation);
        co_return failed();
      }
      const auto missing = store.barrier_missing(name);
      store.leave(name, b->rank, generation);
      co_return ErrorReply{RemoteErrc::timeout,
                           fmt::format("timed out after {} at barrier \"{}\" waiting for {}",
                                       describe_duration(limit), name, describe_ranks(missing))};
    }
    if (auto* s = std::get_if<SetRequest>(&request)) {
      store.set(s->key, std::move(s->value));
      notify();
      co_return OkReply{};
    }
    if (auto* g = std::get_if<GetRequest>(&request)) co_return ValueReply{store.get(g->key)};
    if (auto* w = std::get_if<WaitRequest>(&request)) {
      const milliseconds limit(w->timeout_ms);
      const std::string& key = w->key;
      const std::function<bool()> is_set = [&] { return store.contains(key) || store.failure(); };
      if (co_await wait_until(c, limit, is_set)) {
        if (store.contains(key)) co_return ValueReply{store.get(key)};
        co_return failed();
      }
      co_return ErrorReply{RemoteErrc::timeout,
                           fmt::format("timed out after {} waiting for key \"{}\"",
                                       describe_duration(limit), key)};
    }
    if (auto* h = std::get_if<HeartbeatRequest>(&request)) {
      if (Status s = store.heartbeat(h->rank, Clock::now()); !s.ok()) co_return invalid(s);
      co_return OkReply{};
    }
    if (auto* d = std::get_if<DeadRanksRequest>(&request))
      co_return RanksReply{store.report_dead_ranks(milliseconds(d->max_silence_ms), Clock::now())};
    if (auto* f = std::get_if<FollowRequest>(&request)) {
      // A follower ahead of this store followed another one (this primary restarted):
      // nothing here would ever be new to it.
      if (f->since_seq > store.seq())
        co_return invalid(Status::error(fmt::format(
            "follow from seq {}, but this store is at seq {}: the follower mirrored another store",
            f->since_seq, store.seq())));
      const std::int64_t since = f->since_seq;
      const std::function<bool()> changed = [&] { return store.seq() > since; };
      co_await wait_until(c, milliseconds(f->timeout_ms), changed);
      co_return store.changes_since(since, opt.max_frame_bytes);
    }
    if (std::holds_alternative<ClockProbe>(request)) {
      ClockReply r;
      r.steady_receive_ns = steady_received;
      r.system_receive_ns = system_received;
      r.steady_send_ns = ns_since_epoch(Clock::now());
      r.system_send_ns = ns_since_epoch(std::chrono::system_clock::now());
      co_return r;
    }
    // REQUIRES: is_request(request); every request type is handled above.
    co_return ErrorReply{RemoteErrc::invalid_request, "unsupported request"};
  }

  asio::awaitable<void> serve(std::shared_ptr<Connection> c) {
    if (stopping) co_return;  // stop_all() ran before this coroutine started
    live.insert(c.get());
    Finally cleanup{[this, c] {
      live.erase(c.get());
      waiting.erase(c.get());
      boost::system::error_code ignored;
      c->socket.close(ignored);
      c->watchdog.cancel();
      c->waiter.cancel();
    }};
    boost::system::error_code ec;
    const tcp::endpoint remote = c->socket.remote_endpoint(ec);
    if (!ec) c->peer = endpoint_text(remote);
    c->socket.set_option(tcp::no_delay(true), ec);
    c->set_deadline(opt.io_timeout);
    spawn(watch(c), "watchdog");

    // 1. challenge → auth → welcome | refused
    const Challenge challenge{!opt.token.empty(), make_nonce()};
    const Message challenge_frame = challenge;
    if (!co_await write(*c, challenge_frame)) co_return;
    Message m;
    ReadResult r = co_await read(*c, opt.io_timeout, &m);
    if (r.kind != ReadResult::frame) {
      drop(*c, r.kind == ReadResult::closed ? "closed during the handshake" : r.why);
      co_return;
    }
    const auto* auth = std::get_if<Auth>(&m);
    if (auth == nullptr) {
      drop(*c, fmt::format("expected an auth frame, got {}",
                           type_name(static_cast<std::uint8_t>(type_of(m)))));
      co_return;
    }
    c->process = printable(auth->process, 64);
    c->origin = printable(auth->origin, 120);
    // A token on one side only is refused like two different ones: a job whose nodes
    // disagree on authentication is misconfigured, whichever side has none.
    if (const TokenMatch m = match_tokens(opt.token, challenge.nonce, auth->mac); m != TokenMatch::same) {
      ++dropped;
      const std::string why = refusal_text(m, /*for_client=*/false);
      note_refusal(fmt::format("{}: {}", c->where(), why));
      log_connection_event(fmt::format("rendezvous: refused {}: {}", c->where(), why));
      const Message refused = Refused{refusal_text(m, /*for_client=*/true)};
      co_await write(*c, refused);
      co_return;
    }
    const Message welcome = Welcome{};
    if (!co_await write(*c, welcome)) co_return;

    // 2. requests, one at a time
    for (;;) {
      r = co_await read(*c, opt.idle_timeout, &m);
      if (r.kind == ReadResult::closed || stopping) co_return;
      if (r.kind == ReadResult::failed) {
        drop(*c, r.why);
        co_return;
      }
      if (!is_request(m)) {
        drop(*c, fmt::format("a client may not send a {} frame",
                             type_name(static_cast<std::uint8_t>(type_of(m)))));
        co_return;
      }
      c->set_deadline(kNoDeadline);  // a parked join may legitimately take long
      ++answering;
      Finally answered{[this] { --answering; }};
      Message reply;
      if (std::optional<Message> refused = co_await await_promotion(*c, m))
        reply = std::move(*refused);
      else
        reply = co_await handle(*c, m);
      if (stopping || !co_await write(*c, reply)) co_return;
    }
  }

  RendezvousServerOptions opt;
  RendezvousStore store;
  std::set<Connection*> live;     // io thread only
  std::set<Connection*> waiting;  // io thread only: parked in wait_until
  bool stopping = false;          // io thread only
  std::atomic<int> answering{0};  // requests read and not yet answered (~Impl's drain)
  std::atomic<std::size_t> dropped{0};
  LogThrottle throttle;           // io thread only (and the destructor, after it)
  std::size_t refusals = 0;       // io thread only
  std::string last_refusal;       // io thread only
  std::string bound;
  std::uint16_t port = 0;
  asio::io_context io{1};  // after the sets: coroutine frames die with it
  tcp::acceptor acceptor{io};
  asio::steady_timer log_timer{io};
  std::thread thread;
};

RendezvousServer::RendezvousServer(RendezvousServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->start();
}

RendezvousServer::~RendezvousServer() = default;

std::uint16_t RendezvousServer::port() const { return impl_->port; }
std::string RendezvousServer::address() const { return impl_->bound; }

std::vector<std::uint32_t> RendezvousServer::dead_ranks(milliseconds max_silence) const {
  return impl_->store.dead_ranks(max_silence, Clock::now());
}

std::size_t RendezvousServer::dropped_connections() const { return impl_->dropped.load(); }

Status RendezvousServer::adopt(const ChangesReply& changes) {
  Status s = impl_->store.adopt(changes, Clock::now());
  if (s.ok()) asio::post(impl_->io, [impl = impl_.get()] { impl->notify(); });
  return s;
}

void RendezvousServer::promote() {
  impl_->store.promote(Clock::now());
  asio::post(impl_->io, [impl = impl_.get()] { impl->notify(); });  // requests parked for it
}

bool RendezvousServer::following() const { return impl_->store.following(); }

}  // namespace conveyor
