#pragma once
// Helpers for the rendezvous tests that run a real server on loopback.
#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/rendezvous/client.hpp"
#include "transport/rendezvous/server.hpp"

namespace conveyor::testing {

// Collects the server's log lines (they come from its io thread).
class LogCapture {
 public:
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    };
  }
  bool contains(std::string_view text) const {
    std::lock_guard lock(mu_);
    for (const auto& l : lines_)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
  /// contains(text), waiting up to `within` for the line: some lines are written just
  /// after the peer already saw its connection close.
  bool eventually_contains(std::string_view text,
                           std::chrono::milliseconds within = std::chrono::milliseconds(1000)) const {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (!contains(text)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  std::string all() const {
    std::lock_guard lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Runs f(rank) on one thread per rank; rethrows the first failure on the caller's thread.
template <class F>
void run_ranks(std::uint32_t n, F f) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (std::uint32_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The message of what f() throws; "no error" when it returns.
inline std::string error_of(auto&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

inline RendezvousServerOptions server_options(LogCapture& log, std::string token = "job-token") {
  RendezvousServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.token = std::move(token);
  o.io_timeout = std::chrono::milliseconds(300);
  o.idle_timeout = std::chrono::milliseconds(5000);
  o.log = log.sink();
  return o;
}

inline RendezvousClientOptions client_options(const RendezvousServer& server,
                                              std::string token = "job-token") {
  RendezvousClientOptions o;
  o.host = "127.0.0.1";
  o.port = server.port();
  o.token = std::move(token);
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.io_timeout = std::chrono::milliseconds(2000);
  return o;
}

}  // namespace conveyor::testing
