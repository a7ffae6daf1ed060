#pragma once
// Ends the waits of a process's stage groups at once when a recovery begins. A replica
// that failed never starts its part of the bucket its peers wait for; NCCL cannot tell
// (its kernels spin on data that never comes), so without this a survivor waits in its
// bucket until transport.timeout_s before the recovery can reach it. The coordinator
// cancels every generation below the one the groups are rebuilt with; a waiting rank
// sees it at its next poll, aborts its communicator and fails the bucket (the group is
// abandoned anyway: every recovery rebuilds every stage group).
// What must hold: generations only grow, and a group of the generation not yet
// cancelled is never touched (the next generation forms while the old one winds down).
// Thread-safety: any thread (one atomic).
#include <atomic>
#include <cstdint>

namespace conveyor {

class GroupCancellation {
 public:
  /// Cancels every group of a generation below `generation` (never un-cancels).
  void cancel_below(std::uint32_t generation) {
    std::uint32_t seen = below_.load(std::memory_order_relaxed);
    while (seen < generation &&
           !below_.compare_exchange_weak(seen, generation, std::memory_order_release,
                                         std::memory_order_relaxed)) {
    }
  }
  /// Whether a group of `generation` was cancelled.
  bool cancelled(std::uint32_t generation) const {
    return generation < below_.load(std::memory_order_acquire);
  }

 private:
  std::atomic<std::uint32_t> below_{0};
};

}  // namespace conveyor
