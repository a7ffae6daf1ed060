#pragma once
// A standby's copy of the rendezvous store: a thread whose own client long-polls the
// primary's follow request and hands every change to a follower RendezvousServer
// (server.hpp), which listens from the start and serves once promoted.
//
// Lag: a change reaches the follower about one round trip after it was made (the primary
// answers a parked follow at once). What the primary held in its last moments may be
// missing from the follower: whoever takes over must not depend on it.
// Failures: a primary that cannot be reached (restarting, or gone) is tried again every
// `retry` until stop(), with one log line when it is lost and one when it is back. A
// refusal (the primary's store is not the one mirrored, a wrong token, a bad frame, the
// follower refusing the changes) ends the mirror, with one log line saying why; the
// follower being promoted ends it quietly.
// Threading: the mirror's thread alone uses its client and calls the follower's adopt().
// stop() and the destructor return within about poll + primary.io_timeout + retry,
// since every wait of the client is bounded by these (connect_timeout is capped at poll:
// the mirror retries by itself).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "transport/rendezvous/client.hpp"
#include "transport/rendezvous/server.hpp"

namespace conveyor {

struct StoreMirrorOptions {
  /// Where the primary is (host and port, or a route), with its token.
  RendezvousClientOptions primary;
  /// How long one follow waits at the primary for a change.
  std::chrono::milliseconds poll{500};
  /// The pause before trying the primary again after it could not be reached.
  std::chrono::milliseconds retry{100};
  /// Receives the mirror's few log lines; default: stderr.
  std::function<void(std::string_view)> log;
};

class StoreMirror {
 public:
  /// Starts the thread. REQUIRES: `follower` was started with follower = true and
  /// outlives this mirror.
  StoreMirror(RendezvousServer& follower, StoreMirrorOptions options);
  /// stop().
  ~StoreMirror();
  StoreMirror(const StoreMirror&) = delete;
  StoreMirror& operator=(const StoreMirror&) = delete;

  /// Ends the thread and joins it. Stop the mirror before promoting the follower, so that
  /// no late change arrives after the promotion. Idempotent; from the owner's thread.
  void stop();
  /// The primary's seq up to which the follower holds every change (0 before the first).
  /// Safe from any thread.
  std::int64_t seq() const;
  /// Why the mirror ended, or its latest failure to reach the primary; empty when none.
  /// Safe from any thread.
  std::string last_error() const;

 private:
  void run();
  bool stopping() const;
  /// Waits `d`; false once stop() was called.
  bool pause(std::chrono::milliseconds d);
  void log(std::string_view line) const;
  /// The one line saying why the mirror ended early.
  void end(std::string_view why) const;
  void note_error(std::string why);

  RendezvousServer& follower_;
  StoreMirrorOptions options_;
  std::atomic<std::int64_t> seq_{0};
  mutable std::mutex mu_;
  std::condition_variable stopped_;
  bool stop_ = false;       // guarded by mu_
  std::string last_error_;  // guarded by mu_
  std::thread thread_;      // last: starts once the members above exist
};

}  // namespace conveyor
