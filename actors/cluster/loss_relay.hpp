#pragma once
// Hands what the liveness watch sees (transport/rendezvous/liveness_watch.hpp), on its
// thread, to the actor that must act on it: the coordinator on node 0, the main thread's
// scoped actor on the other nodes. Messages reported before that actor exists are kept
// and delivered, in order, once it is set. Thread-safe.
//
// The messages: (stop_run_atom, std::string why), as the hang watchdog sends it, for a
// loss that ends the job; (node_lost_atom, int node, std::string why) for a lost process
// whose replacement the job waits for (fault.rejoin_timeout_s).
#include <caf/all.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "actors/messages/messages.hpp"

namespace conveyor {

class LossRelay {
 public:
  /// REQUIRES: called at most once. Delivers the losses reported earlier at once.
  void deliver_to(caf::actor target) {
    std::lock_guard lock(mutex_);
    target_ = std::move(target);
    for (auto& m : pending_) caf::anon_send(target_, std::move(m));
    pending_.clear();
  }
  /// Once node 0 (the store, the coordinator) is reported lost, nothing else counts.
  void report(caf::message m, bool node0_lost) {
    std::lock_guard lock(mutex_);
    if (node0_lost_) return;
    node0_lost_ = node0_lost;
    if (target_)
      caf::anon_send(target_, std::move(m));
    else
      pending_.push_back(std::move(m));
  }
  /// Whether node 0 (and with it the store and the coordinator) was reported lost.
  bool node0_lost() const {
    std::lock_guard lock(mutex_);
    return node0_lost_;
  }
  /// Drops the target handle: it must not outlive the actor system.
  void release() {
    std::lock_guard lock(mutex_);
    target_ = caf::actor{};
    pending_.clear();
  }

 private:
  mutable std::mutex mutex_;
  caf::actor target_;
  std::vector<caf::message> pending_;
  bool node0_lost_ = false;
};

}  // namespace conveyor
