#pragma once
// Node 0's book of the shards other processes write themselves (staged_shards.hpp): the
// coordinator expects one per remote stage when it asks for it, the snapshot keeper puts
// what the writing node reports (its manifest entry, or why it failed), and node 0's
// checkpoint writer waits for each before it moves the shard into place.
//
// An attempt is named by its staging token: a report for a token and stage nobody
// expects (a late one of an earlier attempt, or a confused peer) is refused, never taken
// for the current attempt's. Waits are bounded; a node that is lost fails its stages'
// pending shards at once (fail_node) rather than at the end of the wait, and says so in
// the error (CheckpointError::lost_node): that checkpoint is lost with the node, which a
// run that recovers from the loss does not count as its own failure.
// Thread-safety: every member locks; wait() and wait_all() may block several threads.
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/checkpoint/manifest.hpp"
#include "actors/checkpoint/snapshot.hpp"
#include "actors/checkpoint/staged_shards.hpp"

namespace conveyor::checkpoint {

class RemoteShards {
 public:
  /// A shard of `stage` for the attempt `token` will be reported.
  void expect(const std::string& token, int stage);
  /// The report of that shard: its entry, or (entry empty) why it failed. False when no
  /// such shard is expected or it was reported already (the report is dropped).
  bool report(const std::string& token, int stage, std::optional<ShardEntry> entry, std::string error);
  /// Fails the pending shards of every stage that `node` runs (node_of_stage[s] == node):
  /// "node N was lost: why", and wait() names N as the failure's lost_node.
  void fail_node(int node, const std::vector<int>& node_of_stage, const std::string& why);
  /// The entry of that shard once reported; forgets it. Throws CheckpointError naming
  /// `where` (the staging folder) when it failed, was never expected, or did not come
  /// within `timeout`.
  ShardEntry wait(const std::string& token, int stage, std::chrono::milliseconds timeout,
                  const std::string& where);
  /// Fails every shard still pending with `why` (the job is ending).
  void fail_pending(const std::string& why);
  /// Waits until no expected shard is still pending (each reported or failed), at most
  /// `timeout`; false when some are still pending then.
  bool wait_all(std::chrono::milliseconds timeout);
  /// Shards expected and not yet reported.
  std::size_t pending() const;

 private:
  struct Slot {
    bool done = false;
    std::optional<ShardEntry> entry;
    std::string error;
    std::optional<int> lost_node;
  };
  using Key = std::pair<std::string, int>;
  /// Fails, with `why`, every pending shard whose key `which` accepts.
  template <class Which>
  void fail_where(Which which, const std::string& why, std::optional<int> lost_node);
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, Slot> slots_;
};

/// The shard of `stage` that its own node writes into `target` (expected in `book` now):
/// the checkpoint writer waits for its report (at most `timeout`) and moves it into the
/// step folder; a failed report, a missing file or `target.error` fails the checkpoint.
StageShard awaited_shard(std::shared_ptr<RemoteShards> book, const StagingTarget& target, int stage,
                         std::chrono::milliseconds timeout);

}  // namespace conveyor::checkpoint
