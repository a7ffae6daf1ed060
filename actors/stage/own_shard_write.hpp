#pragma once
// A stage of node k > 0 writing its own shard of a checkpoint (checkpoint.writers
// every_node, WriteShard): the stage looks up its snapshot of the step and hands the write
// to its node's queue, so its actor goes on at once. The queue's thread writes the shard
// into node 0's staging folder (actors/checkpoint/staged_shards.hpp) and passes the
// entry, or the error, to the node's reporter actor, which sends it on to node 0's
// snapshot keeper and counts the keeper's answers. Before the process ends, run_job
// closes the queue and asks the reporter to flush: node 0 then knows of every write this
// node accepted.
//
// Why a reporter actor: the queue's thread is no CAF thread, and CAF 0.17 lets such a
// thread send to a local actor (anon_send) but not make a request of its own (a
// scoped_actor there kept ~actor_system waiting forever after a remote request). The
// reporter also outlives the stages, which the coordinator ends before the last
// checkpoint's shards may be written.
#include <caf/all.hpp>

#include <chrono>
#include <mutex>

#include "actors/checkpoint/shard_write_queue.hpp"
#include "actors/stage/stage_remote.hpp"
#include "actors/messages/recovery_messages.hpp"

namespace conveyor {

/// Node k's writes of its own shards: the queue, and where their reports go.
/// Thread-safety: report() and detach() lock.
class NodeShardWrites {
 public:
  checkpoint::ShardWriteQueue& queue() { return queue_; }
  /// Run_node's reporter actor (shard_reporter); detach() before the actor system ends.
  void attach(caf::actor reporter);
  void detach();
  /// From the queue's thread: `report` to node 0's `keeper`, through the reporter.
  void report(const KeeperActor& keeper, ShardWritten report);

 private:
  checkpoint::ShardWriteQueue queue_;
  std::mutex mutex_;
  caf::actor reporter_;
};

/// REQUIRES: a stage of node k > 0 whose peers name node 0's keeper, and the job's
/// shard_writes (the composition root makes them with checkpoint.writers every_node); else throws
/// std::logic_error. A missing snapshot is reported to node 0 as the error.
void write_own_shard(StageSelf* self, const WriteShard& ask);

/// To a shard reporter: answers once every report it took is answered by the keeper.
using flush_shard_reports_atom = caf::atom_constant<caf::atom("shflush")>;

/// Node k's reporter: takes (keeper, ShardWritten) from the queue's thread, requests the
/// keeper's acknowledgement (at most `timeout` each) and logs a report that went unheard.
caf::behavior shard_reporter(caf::event_based_actor* self, std::chrono::milliseconds timeout);

}  // namespace conveyor
