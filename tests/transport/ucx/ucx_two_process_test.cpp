// Two processes (this one and a forked child) exchange UCX worker addresses through a
// pipe, then a 16 MiB tensor each way; each side counts the elements that differ from
// what the other side's rank sends. Every wait is bounded: pipes are polled, the child
// has an alarm, and the parent kills it if it does not exit in time.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/ucx/ucx_test_support.hpp"
#include "transport/ucx/ucx_worker.hpp"

using namespace conveyor;
using namespace conveyor::ucx_test;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kNumel = (16 << 20) / 4;  // 16 MiB of f32
constexpr int kTimeoutMs = 30000;

void write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(std::string("pipe write: ") + std::strerror(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, kTimeoutMs);
    if (ready == 0) throw std::runtime_error("pipe read: timed out");
    if (ready < 0 && errno == EINTR) continue;
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::runtime_error("pipe read: the other process closed the pipe");
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

void send_address(int fd, const std::vector<std::byte>& address) {
  const std::uint64_t n = address.size();
  write_all(fd, &n, sizeof n);
  write_all(fd, address.data(), address.size());
}

std::vector<std::byte> read_address(int fd) {
  std::uint64_t n = 0;
  read_all(fd, &n, sizeof n);
  if (n == 0 || n > (1 << 20)) throw std::runtime_error("pipe: bad address length");
  std::vector<std::byte> address(n);
  read_all(fd, address.data(), n);
  return address;
}

std::uint64_t tag(int rank) { return pack_tag({.edge = 7, .step = 1, .micro_batch = rank, .kind = TagKind::activation}); }

UcxOptions options(const std::string& name, const std::string& transports, bool detect_peer_failure) {
  UcxOptions o = test_options(name, std::chrono::milliseconds(kTimeoutMs));
  o.transports = transports;
  o.detect_peer_failure = detect_peer_failure;
  return o;
}

// Rank 1: receive rank 0's tensor, send its own, report the wrong-element count.
[[noreturn]] void exchange_child(int to_parent, int from_parent, const UcxOptions& opt) {
  ::alarm(120);  // the last resort against a hang
  int code = 0;
  try {
    UcxWorker worker(opt);
    send_address(to_parent, worker.address());
    UcxEndpoint& parent = worker.connect(read_address(from_parent), "rank 0");
    const Tensor got = parent.receive(tag(0), Shape{kNumel}, DType::f32);
    const std::int64_t wrong = wrong_elements(got, 0);
    parent.send(tag(1), filled(1, kNumel));
    // Wait for rank 0 to have the tensor before this worker goes away.
    char done = 0;
    read_all(from_parent, &done, 1);
    write_all(to_parent, &wrong, sizeof wrong);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ucx two-process child: %s\n", e.what());
    code = 3;
  }
  std::fflush(stderr);
  ::_exit(code);
}

// Rank 1: connect, take one small message, then die without closing anything.
[[noreturn]] void dying_child(int to_parent, int from_parent, const UcxOptions& opt) {
  ::alarm(120);
  try {
    UcxWorker* worker = new UcxWorker(opt);  // never destroyed: the process just ends
    send_address(to_parent, worker->address());
    UcxEndpoint& parent = worker->connect(read_address(from_parent), "rank 0");
    parent.receive(tag(0), Shape{16}, DType::f32);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ucx dying child: %s\n", e.what());
    std::fflush(stderr);
    ::_exit(3);
  }
  ::_exit(0);
}

// Waits for `pid` up to `timeout`, then kills it. Returns its exit status (-1 if killed).
int reap(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

// A forked rank 1 running `child`, with a pipe each way; reaped (or killed) on scope exit.
struct Child {
  int to_parent[2] = {-1, -1};
  int to_child[2] = {-1, -1};
  pid_t pid = -1;
  int status = -2;

  template <class F>
  explicit Child(F&& child) {
    REQUIRE(::pipe(to_parent) == 0);
    REQUIRE(::pipe(to_child) == 0);
    std::fflush(nullptr);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(to_parent[0]);
      ::close(to_child[1]);
      child(to_parent[1], to_child[0]);
    }
    ::close(to_parent[1]);
    ::close(to_child[0]);
  }
  int in() const { return to_parent[0]; }
  int out() const { return to_child[1]; }
  int wait() {
    if (status == -2) {
      ::close(to_parent[0]);
      ::close(to_child[1]);
      status = reap(pid, 60s);
    }
    return status;
  }
  ~Child() { wait(); }
};

void exchange_16_mib(const std::string& transports) {
  const UcxOptions child_options = options("rank 1", transports, false);
  Child child([&](int to_parent, int from_parent) { exchange_child(to_parent, from_parent, child_options); });
  std::int64_t wrong_at_child = -1;
  std::int64_t wrong_here = -1;
  std::string error;
  try {
    UcxWorker worker(options("rank 0", transports, false));
    send_address(child.out(), worker.address());
    UcxEndpoint& peer = worker.connect(read_address(child.in()), "rank 1");
    const Tensor sent = filled(0, kNumel);
    const auto start = std::chrono::steady_clock::now();
    peer.send(tag(0), sent);
    const Tensor got = peer.receive(tag(1), Shape{kNumel}, DType::f32);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("16 MiB each way between two processes in " << ms << " ms over UCX_TLS=" << transports
                                                        << "\n" << peer.transport_info());
    wrong_here = wrong_elements(got, 1);
    const char done = 1;
    write_all(child.out(), &done, 1);
    read_all(child.in(), &wrong_at_child, sizeof wrong_at_child);
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK_MESSAGE(error.empty(), error);
  CHECK(child.wait() == 0);
  CHECK(wrong_here == 0);
  CHECK(wrong_at_child == 0);
}

}  // namespace

TEST_CASE("two processes exchange a 16 MiB tensor over UCX intact") {
  exchange_16_mib(test_transports());
}

TEST_CASE("two processes exchange a 16 MiB tensor over UCX's TCP transport intact") {
  exchange_16_mib("tcp");
}

TEST_CASE("a UCX receive from a process that died fails at once when peer failures are detected") {
  const UcxOptions child_options = options("rank 1", "tcp", true);
  Child child([&](int to_parent, int from_parent) { dying_child(to_parent, from_parent, child_options); });
  UcxWorker worker(options("rank 0", "tcp", true));
  send_address(child.out(), worker.address());
  UcxEndpoint& peer = worker.connect(read_address(child.in()), "rank 1");
  peer.send(tag(0), filled(0, 16));
  CHECK(child.wait() == 0);
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    peer.receive(tag(1), Shape{16}, DType::f32, 20s);
  } catch (const UcxTimeout& e) {
    message = std::string("timed out: ") + e.what();
  } catch (const UcxError& e) {
    message = e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO(message);
  CHECK(message.find("receive of activation edge 7 step 1 mb 1") != std::string::npos);
  CHECK(message.find("connection to rank 1 broke") != std::string::npos);
  CHECK(elapsed < 15s);
}
