#pragma once
// The coordinator drives training: per step it sends every stage actor its action list,
// gathers their reports, computes the loss, the global gradient norm and the clip scale,
// has every stage take its optimizer step together (a step is atomic), evaluates on the
// held-out split every `eval_every` steps (in waves: actors/plan/eval_plan.hpp), and finally
// gathers the weights. It monitors
// every stage: a stage failure ends the run with that stage's reason.
// With a CheckpointHook in the job, at every step boundary it asks the hook whether to
// snapshot (or snapshot and stop), gathers every stage's state and hands it over before
// the next step starts (checkpoint_hook.hpp).
//
// Recovery (fault.policy restart, fault.on_nan rollback; coordinator_recovery.cpp): the
// stages keep in-memory snapshots (job->services.snapshots). A failed or hung stage is respawned
// through StageRestarts::respawn, every stage drops the aborted round and loads the
// newest snapshot all of them hold, and the steps from there are replayed. Every request
// made before a recovery carries the generation it was made in; replies from an older
// generation are ignored (stage_gather.hpp), and so are reports of aborted rounds.
// Across processes (coordinator_rejoin.cpp): a node whose process is lost (its silence
// at the store, its CAF connection) is waited for up to fault.rejoin_timeout_s; its
// replacement's stages (NodeStages, from node 0's directory) take the lost ranks and are
// restored from node 0's copies of their snapshots (actors/cluster/snapshot_keeper.hpp),
// every other stage from its own. When none joins in time and fault.shrink allows it
// (coordinator_shrink.cpp, issue 44), the nodes left take the job on a smaller layout
// instead: new stage actors of that layout, their state cut in memory from node 0's
// snapshots and copies of the step every stage held, then the replay. A node that joins
// the shrunk job later (coordinator_grow.cpp) is taken in at a boundary fault.grow allows:
// the same move onto the layout of the nodes present and joined, from that boundary's
// snapshots, nothing replayed.
#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/checkpoint/remote_shards.hpp"
#include "actors/coordinator/coordinator_phase.hpp"
#include "actors/job/checkpoint_hook.hpp"
#include "actors/fault/restart_budget.hpp"
#include "actors/messages/coordinator_interface.hpp"
#include "actors/messages/messages.hpp"
#include "actors/job/job_services.hpp"
#include "actors/trace/coordinator_probe.hpp"

namespace conveyor {

/// How the coordinator replaces a stage actor (fault.policy restart); empty: it cannot.
struct StageRestarts {
  /// A new actor for `rank` (of the coordinator's process) that ignores messages of
  /// rounds up to `round_fence`.
  std::function<StageActor(int rank, std::int64_t round_fence)> respawn;
  /// After every recovery, before the replay (re-arms the hang watchdog).
  std::function<void()> recovered;
  /// A recovery began to wait for a lost node's replacement, a wait that
  /// fault.rejoin_timeout_s bounds (pauses the hang watchdog until `recovered`).
  std::function<void()> waiting_for_replacement;
  /// Multi-process runs: the node that runs each rank (the coordinator's is node 0);
  /// empty when every stage runs in this process.
  std::vector<int> node_of_rank;
  /// Node 0's snapshot keeper: takes the other nodes' snapshot copies and restores the
  /// ranks of a rejoined node. Null in one process.
  KeeperActor keeper;
  /// The standby's snapshot keeper, on `standby_node` (the lowest node of the layout other
  /// than 0; actors/plan/leader_election.hpp): node 0's stages send it copies of their
  /// snapshots (PeerTable). Null and -1: none (one node, or no buddy copies). Node 0's
  /// directory names it with the layout's actors; a re-plan, or the standby's
  /// replacement, names it again.
  KeeperActor standby_keeper;
  int standby_node = -1;
  /// How long to wait for a lost node's replacement (fault.rejoin_timeout_s); 0 (no
  /// buddy copies to restore it from, or the key's 0): lost nodes end the run.
  std::chrono::milliseconds rejoin_timeout{0};
  /// Why a lost node cannot be replaced (actors/runtime/run_job.cpp), said when one ends the run; empty
  /// when it can be.
  std::string no_rejoin;
  /// How long a checkpoint (or a grow) waits for the copies of other nodes' snapshots of
  /// its step.
  std::chrono::milliseconds copy_wait{std::chrono::seconds(30)};
  /// Node 0's directory: respawns a failed stage of another node whose process lives on
  /// (RespawnStage). Null: such a failure ends the run.
  caf::actor directory;
  /// The stages of other nodes keep their snapshots to themselves (fault.buddy_copies
  /// off, the default for GPU stages): the coordinator notes the steps they hold
  /// (SnapshotStore::put_marker) and asks for copies of those a checkpoint writes or a
  /// grow cuts (CopySnapshot).
  bool remote_markers = false;
  /// checkpoint.writers every_node: node 0's book of the shards that the other nodes
  /// write themselves (their stages are sent WriteShard, the keeper notes their reports);
  /// null: node 0 writes every shard.
  std::shared_ptr<checkpoint::RemoteShards> remote_shards;
  /// NCCL edges join stages of different nodes: every recovery rebuilds them on every
  /// node (RebuildChannels through the directory) before the stages restore.
  bool rebuild_channels = false;
};

namespace coordinator_flow {
struct PendingRecovery;
struct Relaying;
}

/// A lost node whose replacement the coordinator waits for.
struct AwaitedNode {
  std::vector<int> ranks;
  std::string why;
};

struct CoordinatorState {
  std::shared_ptr<const Job> job;  // the layout's now (a shrink replaces it)
  // The job as it started, and where its actors ran: every re-plan is computed from these
  // (actors/plan/elastic_plan.hpp), never from a shrunk layout.
  std::shared_ptr<const Job> started;
  std::vector<int> started_nodes;
  int layout_generation = 0;  // re-plans so far (plan.json's "generation")
  TrainingObserver* observer = nullptr;
  CheckpointHook* checkpoints = nullptr;  // job->services.checkpoints
  std::optional<std::int64_t> handed_over;  // the step of the last state given to checkpoints->take
  std::vector<StageActor> stages;
  std::vector<std::shared_ptr<const std::vector<sched::Action>>> train_plans;

  caf::typed_response_promise<TrainResult> done;
  std::int64_t round = 0;
  std::int64_t step = 0;
  Phase phase = Phase::train;
  std::vector<StageReport> reports;
  std::chrono::steady_clock::time_point step_start;
  StepMetrics last_step;
  std::optional<EvalMetrics> last_eval;  // none before the first evaluation
  trace::CoordinatorProbe probe;  // trace records of plans, reports, optimizer steps

  // Recovery (coordinator_recovery.cpp).
  StageRestarts restarts;
  std::optional<RestartBudget> budget;  // set when recovery is possible
  std::uint64_t generation = 0;   // bumped by every recovery; older replies are void
  // Where the run is (coordinator_phase.hpp); changed only through enter(). What a
  // recovery waits for (awaiting, respawning, rejoined) stays in its own fields: they are
  // counts and sets the recovery needs anyway, and a phase for them would be a second
  // record to keep in step.
  CoordinatorPhase run_phase = CoordinatorPhase::starting;
  std::shared_ptr<coordinator_flow::PendingRecovery> recovery;  // while recovering
  std::map<int, AwaitedNode> awaiting;  // lost nodes, until their replacements announce
  std::set<int> rejoined;               // ranks to restore from node 0's copies
  // Nodes that joined after a shrink and wait for a boundary fault.grow allows
  // (coordinator_grow.cpp): the stage actors each started with, and when it joined.
  struct JoinedNode {
    NodeStages stages;
    std::chrono::steady_clock::time_point at;
  };
  std::map<int, JoinedNode> joined;
  // A grow without buddy copies (StageRestarts::remote_markers): the boundary whose
  // snapshots node 0 asked the other nodes' stages to copy to it, the ranks asked and
  // when (coordinator_grow.cpp: its log line says how long the copies took).
  struct AskedCopies {
    std::int64_t steps_done = 0;
    std::vector<int> ranks;
    std::chrono::steady_clock::time_point at;
  };
  std::optional<AskedCopies> grow_copies;
  // Nodes kept in the job without a stage: a move seated none of their ranks (a shrink onto
  // fewer replicas), their processes wait for node 0. The next re-plan counts them
  // (actors/plan/replan_nodes.hpp); one lost is dropped (coordinator_rejoin.cpp).
  std::set<int> idle_nodes;
  // Issue 44: the move onto another layout under way (coordinator_relayout.cpp), from its
  // Relayout until every new actor is restored; null: none. A node lost meanwhile
  // abandons it (abandon_move).
  std::shared_ptr<coordinator_flow::Relaying> moving;
  // A move was abandoned before its actors took over: the nodes' own records (their
  // stores, their layout) may be the void move's, so the old layout cannot be restored in
  // place; only a move can go on (the next shrink). Cleared once a move takes over.
  bool between_layouts = false;
  int respawning = 0;                   // RespawnStage requests to other nodes not answered yet
  std::uint32_t channel_generation = 0; // of the NCCL edges, bumped by each rebuild
  std::uint32_t group_generation = 0;   // of the replicas' stage groups, bumped by each rebuild
  // Completed steps every stage holds while no optimizer step of the round is under way
  // (train: st.step; eval and after every optimizer step: st.step + 1); nullopt from the
  // first OptimizerStep sent until the last answered. A respawned stage can copy a
  // replica's state only at such a boundary (actors/fault/restore_source.hpp).
  std::optional<std::int64_t> boundary;
  std::int64_t rolled_back_step = -1;   // the step a NaN rollback last replayed
  std::int64_t evaluated_through = -1;  // the train step the last finished eval followed
  // The evaluation under way runs in waves (actors/plan/eval_plan.hpp): the first micro-batch
  // of the current one, and the reports of those before it.
  int eval_first = 0;
  std::vector<StageReport> eval_reports;
  // A stop dropped the evaluation after the last step: a fact of the result (TrainResult),
  // not a phase; the run then finishes as any other.
  bool final_eval_dropped = false;
  static inline const char* name = "coordinator";

  /// Goes to phase `to`; an illegal transition throws std::logic_error (the actor's
  /// exception handler then fails the run with it).
  void enter(CoordinatorPhase to) { run_phase = transition(run_phase, to); }
  bool in(CoordinatorPhase p) const { return run_phase == p; }
};

using CoordinatorSelf = CoordinatorActor::stateful_base<CoordinatorState>;

CoordinatorActor::behavior_type coordinator_actor(CoordinatorSelf* self, std::shared_ptr<const Job> job,
                                                  std::vector<StageActor> stages,
                                                  TrainingObserver* observer, StageRestarts restarts);

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::TrainResult)
