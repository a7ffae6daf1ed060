#pragma once
// The state behind the rendezvous server: who joined, barrier arrivals, the key-value
// map, last heartbeats. No sockets and no waiting: the server asks "does the condition
// hold yet?" and wakes its waiters after every change. Time is passed in, so tests drive
// it directly.
//
// Thread-safety: every member takes the internal mutex; safe from any thread.
// Invariants: world_size is fixed by the first join; joined ranks are < world_size;
// a barrier's arrival set never holds a rank twice and empties when it completes, which
// bumps its generation (so a name can be reused for the next barrier).
//
// A launch that cannot be right (two live processes claiming one rank, or ranks started
// with different world sizes), as a serious launcher treats it:
//   - before every rank has joined, nothing has started and one of the two processes is
//     misconfigured, but not which: the rendezvous FAILS (failure()), so that every rank
//     waiting in join, node 0's included, stops at once with the same message instead of
//     waiting out its timeout for a rank that was started under another number;
//   - once every rank has joined, the job is complete (and running): the newcomer alone
//     is REFUSED, so that a stray process can never stop a job it does not belong to.
// A second process for a rank is a duplicate only while the first is alive (the server
// still has a connection from it, and no one has been told the rank is dead); otherwise
// it is that rank's replacement after a restart, which is allowed.
//
// Mirroring (a standby that can take over when the primary's host is lost). Every change
// a standby must have gets the next sequence number: setting a value, and a join that
// changes the world size or the joined ranks and their processes. Heartbeats, barriers
// and a failure are not mirrored (barriers are start-up only; liveness restarts at
// promote()). Lost marks are values ("lost/<rank>", liveness_watch.hpp) and travel as
// such. A follower store takes the primary's changes_since() through adopt(), in order,
// under sequence numbers of its own; promote() turns it into a primary for good.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transport/rendezvous/frame.hpp"
#include "transport/rendezvous/status.hpp"

namespace conveyor::rendezvous {

/// Who asks to join.
struct Joiner {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  /// An id of the joining process (Auth::process); empty: unknown, never a duplicate.
  std::string process;
  /// How messages name it: "127.0.0.1:40312 (host gpu7, pid 4242)".
  std::string where;
};

class RendezvousStore {
 public:
  using Clock = std::chrono::steady_clock;
  /// Whether the process with this id is still there (the server's connections say).
  using ProcessAlive = std::function<bool(const std::string& process)>;

  /// A primary, or a follower (a standby's mirror) until promote().
  explicit RendezvousStore(bool follower = false) : following_(follower) {}

  /// Records the joiner's rank as joined (again, after a restart, is fine) and as alive
  /// at `now`. Fails when world_size is 0, rank is out of range, the rendezvous failed
  /// before, or for the conflicts in the header comment (then failure() may be set).
  Status join(const Joiner& joiner, Clock::time_point now, const ProcessAlive& alive);
  /// A join from an unknown process (never a duplicate).
  Status join(std::uint32_t rank, std::uint32_t world_size, Clock::time_point now);
  bool all_joined() const;
  /// Why the rendezvous can no longer complete; every later join fails with it too.
  std::optional<std::string> failure() const;
  /// Ranks below the world size that have not joined, ascending (empty before any join).
  std::vector<std::uint32_t> missing_ranks() const;

  /// `rank` arrives at barrier `name`; *generation is the barrier's generation it waits
  /// on (passed() turns true when that generation completes). REQUIRES: rank joined.
  Status arrive(const std::string& name, std::uint32_t rank, std::uint64_t* generation);
  bool passed(const std::string& name, std::uint64_t generation) const;
  /// Joined-world ranks that have not arrived at the current generation of `name`.
  std::vector<std::uint32_t> barrier_missing(const std::string& name) const;
  /// Withdraws an arrival that timed out (no effect once the generation completed).
  void leave(const std::string& name, std::uint32_t rank, std::uint64_t generation);

  void set(const std::string& key, Bytes value);
  std::optional<Bytes> get(const std::string& key) const;
  bool contains(const std::string& key) const;

  /// Marks a joined rank alive at `now`.
  Status heartbeat(std::uint32_t rank, Clock::time_point now);
  /// Joined ranks whose last join or heartbeat is older than `max_silence`, ascending.
  std::vector<std::uint32_t> dead_ranks(Clock::duration max_silence, Clock::time_point now) const;
  /// dead_ranks(), and remembers that they were reported so: until such a rank joins or
  /// heartbeats again, a new process may take it over (a frozen or unreachable process's
  /// connections can stay open long after it is gone).
  std::vector<std::uint32_t> report_dead_ranks(Clock::duration max_silence, Clock::time_point now);

  /// The sequence number of the latest mirrored change; 0 before any.
  std::int64_t seq() const;
  /// What changed after `since`: the values set since then (in the order they were set),
  /// the world size and every joined rank. Fills the reply up to `max_frame_bytes` (its
  /// length field, frame.hpp) and then stops early: its seq is then that of the last
  /// value in it, and the rest comes with the next call. At least one value goes in.
  /// REQUIRES: 0 <= since <= seq().
  ChangesReply changes_since(std::int64_t since, std::size_t max_frame_bytes) const;
  /// A follower takes a primary's changes. Ranks new to it count as seen at `now`.
  /// Fails (and changes nothing) once promoted, or when the world size differs from the
  /// one adopted before.
  Status adopt(const ChangesReply& changes, Clock::time_point now);
  /// True for a follower that was not promoted yet.
  bool following() const;
  /// The follower becomes a primary: every joined rank counts as seen at `now` (the old
  /// primary's heartbeats were not mirrored, so silence is measured afresh from here) and
  /// none as reported dead. Once promoted, adopt() fails. No effect on a primary (or a
  /// follower promoted before).
  void promote(Clock::time_point now);

 private:
  struct Barrier {
    std::uint64_t generation = 0;
    std::set<std::uint32_t> arrived;
  };
  struct Holder {
    std::string process;
    std::string where;
    bool operator==(const Holder&) const = default;
  };
  Status check_joined(std::uint32_t rank, const char* what) const;  // REQUIRES: mu_ held
  bool every_rank_joined() const;  // REQUIRES: mu_ held
  // REQUIRES: mu_ held. Fails the rendezvous with `conflict` before the job is complete,
  // else refuses the joiner alone.
  Status reject(const std::string& conflict);

  mutable std::mutex mu_;
  std::optional<std::uint32_t> world_size_;
  std::uint32_t world_rank_ = 0;  // the rank whose join set world_size_ (rank 0 once it joined)
  std::optional<std::string> failure_;
  std::map<std::uint32_t, Clock::time_point> last_seen_;  // joined ranks
  std::map<std::uint32_t, Holder> holders_;               // the process of each joined rank
  std::set<std::uint32_t> reported_dead_;
  std::map<std::string, Barrier> barriers_;
  struct Value {
    Bytes bytes;
    std::int64_t seq = 0;  // when it was last set
  };
  std::map<std::string, Value, std::less<>> values_;
  std::int64_t seq_ = 0;  // the latest mirrored change
  bool following_ = false;
};

}  // namespace conveyor::rendezvous
