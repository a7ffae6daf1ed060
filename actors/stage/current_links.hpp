#pragma once
// The StageLinks of the layout a process runs now. A StageLinks is read-only once built
// (its stages share it); issue 44's re-plan builds new ones, with the new layout's
// node_of_rank, for the new layout's stages, and the long-lived actors of the process that
// route by rank (node 0's snapshot keeper; the final weights' fetch) read them from here.
// Thread-safety: get and set lock; what get returned stays valid (shared).
#include <memory>
#include <mutex>

#include "actors/stage/stage_links.hpp"

namespace conveyor {

class CurrentLinks {
 public:
  explicit CurrentLinks(std::shared_ptr<const StageLinks> links) : links_(std::move(links)) {}
  std::shared_ptr<const StageLinks> get() const {
    std::lock_guard lock(mutex_);
    return links_;
  }
  void set(std::shared_ptr<const StageLinks> links) {
    std::lock_guard lock(mutex_);
    links_ = std::move(links);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const StageLinks> links_;
};

}  // namespace conveyor
