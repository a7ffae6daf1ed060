#pragma once
// The recovery settings of a run (fault.*), as the config loader parses them: plain enums
// and numbers, no CAF. The coordinator, the stages and the launch read them from the job.

namespace conveyor {

/// fault.on_nan: what a step whose loss or gradient norm is not finite does: stop the run,
/// drop that step's update, or restore every stage to its last snapshot and replay the
/// step once (a second non-finite result there stops the run).
enum class NanPolicy { abort, skip, rollback };

/// fault.policy: a failed stage (exception, injected crash, hang) stops the run, or is
/// respawned and every stage rolls back to the newest in-memory snapshot.
enum class FaultPolicy { abort, restart };

/// fault.buddy_copies, for a job over several processes: whether node 0 keeps a copy of
/// every other node's snapshots as they are taken (on: a lost process can rejoin, its
/// stages restore node 0's copies; host-memory stages only) or only of those a checkpoint
/// or a stop writes, asked for then (off). Automatic: on when every stage runs on the CPU.
enum class BuddyCopies { automatic, on, off };

/// fault.shrink (issue 44): when a lost node's replacement has not joined within
/// fault.rejoin_timeout_s, how the job re-plans over the nodes left (actors/plan/replan.hpp):
/// drop whole replicas (keeping the pipeline), shrink the pipeline (keeping the replicas),
/// or automatic: drop replicas when parallel.data > 1, else shrink the pipeline; never:
/// the job fails as it did before re-planning existed (replan() then finds no layout).
enum class ShrinkPolicy { automatic, replicas, stages, never };

/// fault.grow (issue 44): when a node that joins after a shrink is taken in: at the next
/// step boundary, at the next checkpoint boundary, or never (the job stays shrunk and the
/// node that joins is refused; actors/coordinator/coordinator_grow.cpp).
enum class GrowPolicy { at_step, at_checkpoint, never };

/// fault.leader_failover (issue 44 item 7), for a job over several processes with buddy
/// copies (the standby's): once node 0
/// (the leader: the coordinator and the store) is lost, the survivors elect its standby
/// and move their store clients to its promoted store (automatic), or the job ends at
/// once as it always did (off). Taking over the coordinator is not implemented yet: with
/// automatic the job still ends, saying whom it elected.
enum class LeaderFailoverPolicy { automatic, off };

struct RecoverySettings {
  FaultPolicy policy = FaultPolicy::abort;
  BuddyCopies buddy_copies = BuddyCopies::automatic;  // the composition root resolves automatic (actors/runtime/job_setup.cpp)
  int snapshot_every = 1;    // steps between in-memory snapshots (fault.snapshot_every)
  int max_restarts = 3;      // recoveries allowed within window_s ...
  double window_s = 600.0;   // ... beyond which the run checkpoints and stops
  ShrinkPolicy shrink = ShrinkPolicy::automatic;  // fault.shrink (coordinator_shrink.cpp)
  GrowPolicy grow = GrowPolicy::at_step;          // fault.grow (coordinator_grow.cpp)
  LeaderFailoverPolicy leader_failover = LeaderFailoverPolicy::automatic;  // fault.leader_failover (leader_failover.hpp)
};

}  // namespace conveyor
