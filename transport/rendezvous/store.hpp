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
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transport/rendezvous/frame.hpp"
#include "transport/rendezvous/status.hpp"

namespace conveyor::rendezvous {

class RendezvousStore {
 public:
  using Clock = std::chrono::steady_clock;

  /// Records `rank` as joined (again, after a restart, is fine) and as alive at `now`.
  /// Fails when world_size is 0, differs from the job's, or rank is out of range.
  Status join(std::uint32_t rank, std::uint32_t world_size, Clock::time_point now);
  bool all_joined() const;
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

 private:
  struct Barrier {
    std::uint64_t generation = 0;
    std::set<std::uint32_t> arrived;
  };
  Status check_joined(std::uint32_t rank, const char* what) const;  // REQUIRES: mu_ held

  mutable std::mutex mu_;
  std::optional<std::uint32_t> world_size_;
  std::map<std::uint32_t, Clock::time_point> last_seen_;  // joined ranks
  std::map<std::string, Barrier> barriers_;
  std::map<std::string, Bytes, std::less<>> values_;
};

}  // namespace conveyor::rendezvous
