#pragma once
// Hands a node loss, seen on the liveness watch's thread (transport/rendezvous/
// liveness_watch.hpp), to the actor that must act on it: the coordinator on node 0, the
// main thread's scoped actor on the other nodes. A loss seen before that actor exists
// is kept and delivered once it is set. Thread-safe.
//
// The message: (stop_run_atom, std::string why), as the hang watchdog sends it.
#include <caf/all.hpp>

#include <mutex>
#include <optional>
#include <string>

#include "actors/messages.hpp"

namespace conveyor {

class LossRelay {
 public:
  /// REQUIRES: called at most once. Delivers a loss reported earlier at once.
  void deliver_to(caf::actor target) {
    std::lock_guard lock(mutex_);
    target_ = std::move(target);
    if (loss_) send(*loss_);
  }
  /// Only the first loss counts: the rest follow from it.
  void report(std::string why, bool node0_lost) {
    std::lock_guard lock(mutex_);
    if (loss_) return;
    loss_ = Loss{std::move(why), node0_lost};
    if (target_) send(*loss_);
  }
  /// Whether the loss reported was node 0's (and with it the store's and the
  /// coordinator's) rather than some other node's.
  bool node0_lost() const {
    std::lock_guard lock(mutex_);
    return loss_ && loss_->node0_lost;
  }
  /// Drops the target handle: it must not outlive the actor system.
  void release() {
    std::lock_guard lock(mutex_);
    target_ = caf::actor{};
  }

 private:
  struct Loss {
    std::string why;
    bool node0_lost = false;
  };
  void send(const Loss& l) { caf::anon_send(target_, stop_run_atom::value, l.why); }

  mutable std::mutex mutex_;
  caf::actor target_;
  std::optional<Loss> loss_;
};

}  // namespace conveyor
