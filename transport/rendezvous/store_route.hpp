#pragma once
// Where a process's rendezvous clients find the store: one holder shared by all of them
// (RendezvousClientOptions::route), so that moving it re-points every client at once,
// e.g. at a standby promoted after the primary's host was lost (store_mirror.hpp).
//
// A client reads the route on each (re)connect, and before each request checks whether
// the route moved since it connected; if so it reconnects first. A request already under
// way finishes (or fails) on the old server.
//
// Thread-safety: every member takes the internal mutex; safe from any thread.
#include <cstdint>
#include <mutex>
#include <string>

namespace conveyor::rendezvous {

class StoreRoute {
 public:
  struct Address {
    std::string host;
    std::uint16_t port = 0;
    /// Counts the moves: a client compares it with the one it connected under.
    std::uint64_t version = 0;
  };

  StoreRoute(std::string host, std::uint16_t port) : address_{std::move(host), port, 0} {}

  Address address() const {
    std::lock_guard lock(mu_);
    return address_;
  }
  std::uint64_t version() const {
    std::lock_guard lock(mu_);
    return address_.version;
  }
  /// Re-points every client sharing this route at host:port.
  void move_to(std::string host, std::uint16_t port) {
    std::lock_guard lock(mu_);
    address_ = Address{std::move(host), port, address_.version + 1};
  }

 private:
  mutable std::mutex mu_;
  Address address_;
};

}  // namespace conveyor::rendezvous
