#pragma once
// The coordinator's step flow, shared by its behavior (coordinator_actor.cpp) and its
// recovery (coordinator_recovery.cpp). Internal to actors/coordinator/.
#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/fault/snapshot_store.hpp"
#include "actors/plan/elastic_plan.hpp"

namespace conveyor::coordinator_flow {

using Self = CoordinatorSelf;

/// Sends every stage its plan for the next round of `phase` (the step is st.step).
void start_round(Self* self, Phase phase);
/// Ends the run with `why`: the pending train request gets it, every stage is stopped.
void fail(Self* self, const std::string& why);
/// Why stage `rank` ended or did not answer, in words naming its node (stage_end_text.hpp).
std::string stage_text(Self* self, const caf::error& e, int rank);
/// Starts the evaluation after step st.step: its first wave (actors/plan/eval_plan.hpp).
void start_eval(Self* self);
/// Goes on from a boundary where every stage holds the state after `steps_done` steps:
/// the evaluation that followed step steps_done - 1 when it was due and has not finished,
/// else train step steps_done.
void resume_at_boundary(Self* self, std::int64_t steps_done);

/// A failure to recover from.
struct Failure {
  std::string fault;          // crash | hang | nan | node | collective
  std::vector<int> stages;    // where it was seen
  std::vector<int> respawn;   // ranks whose actor is replaced (dead, hung, or lost with a node)
  std::string reason;         // as detected, for the log and the error
};

/// The recovery under way (CoordinatorState::recovery).
struct PendingRecovery {
  Failure failure;
  std::int64_t failed_step = 0;
  std::int64_t restored = 0;  // the step every stage goes back to
  std::chrono::steady_clock::time_point detected;
  std::optional<std::int64_t> boundary;  // CoordinatorState::boundary when detected
  std::string restored_from = "snapshot";  // RestoreSource::describe
};

/// Starts recovering from `failure` when the run can (fault.policy restart or on_nan
/// rollback, a snapshot or a healthy replica to restore from, a way to respawn when ranks
/// must be) and returns true; the run then goes on by itself. Also true when it stopped
/// the run itself with a fuller reason (the budget spent, no state to restore). False:
/// the caller fails the run with the reason.
bool try_recover(Self* self, Failure failure);
/// With replicas: a failure seen while a recovery is under way (a stage that died after
/// its replica group failed, one that died or could not rejoin during the recovery) joins
/// it: its actors are respawned too and the restore starts over (a new generation voids
/// the replies to the first one). Counts against the budget unless the recovery so far
/// was only the broken group that this failure explains. True: handled.
bool join_recovery(Self* self, Failure failure);
/// A stage's replica group failed (ReplicaGroupFailed): recover, unless a recovery is
/// under way already (it rebuilds every group) or the round is over.
void on_group_failed(Self* self, int rank, std::int64_t round, const std::string& what);

/// Every stage's snapshot of `steps_done` as checkpoint shards, with the AdamW step count;
/// nullopt unless every stage actor holds it. With replicas, replica 0's stages only (the
/// first P actors): a checkpoint holds one copy of each pipeline stage.
std::optional<std::pair<std::vector<checkpoint::StageShard>, std::int64_t>> snapshot_shards(
    const CoordinatorState& st, std::int64_t steps_done);
/// checkpoint.writers every_node across processes (coordinator_shard_writes.cpp): whether
/// the other nodes write their own stages' shards of a checkpoint.
bool remote_shards_written_by_nodes(const CoordinatorState& st);
/// Such a checkpoint's shards: node 0's stages' from its snapshots, every other node's
/// awaited (each of those stages is sent WriteShard now); nullopt, with nothing sent,
/// until every stage of replica 0 holds the step (a marker or a copy for another node's).
std::optional<std::pair<std::vector<checkpoint::StageShard>, std::int64_t>> shards_written_by_nodes(
    Self* self, std::int64_t steps_done);
/// Beyond fault.max_restarts within fault.window_s: a checkpoint of the newest state every
/// stage holds (when the run checkpoints), then the run stops with the reason.
void give_up(Self* self, const Failure& f);
/// Every stage restored: the recovery row, the watchdog rearmed, the replay started.
void finish_recovery(Self* self);
/// A request to a stage failed because the stage died (of this process, or of another
/// whose process lives on): with replicas its down message joins it into the recovery
/// (join_recovery), or names its node's loss, so the error is not the run's.
bool died_meanwhile(const CoordinatorState& st, int rank, const caf::error& e);

// With replicas (coordinator_replica_recovery.cpp):
/// Every stage aborts the round and leaves its group; each respawned stage copies the
/// state of its source (a healthy replica), the others keep theirs; then
/// rejoin_replica_groups.
void restore_from_replicas(Self* self, const std::map<int, int>& sources);
/// Every stage joins the next generation of its stage group, then finish_recovery (at once
/// without replica groups).
void rejoin_replica_groups(Self* self);
/// Every stage joins the next generation of its groups (replicas' and the tied
/// embedding's), then `joined`; a rank that did not join: `failed(rank, error, generation)`.
/// Without groups, `joined` at once.
void join_next_group_generation(Self* self, std::function<void()> joined,
                                std::function<void(int, caf::error&, std::uint32_t)> failed);

/// Whether `rank` runs in another process than the coordinator.
bool is_remote(const CoordinatorState& st, int rank);
/// What every stage of the layout is told (PeerTable): the stages by rank and where
/// their snapshot copies go (node 0's keeper, the standby's for node 0's stages).
PeerTable peer_table(const CoordinatorState& st);
/// Whether a lost node's stages are waited for (its replacement restores node 0's copies
/// or the newest checkpoint): a keeper and a fault.rejoin_timeout_s. Without it a lost
/// node ends the job, whether the loss comes first or during another recovery.
bool waits_for_replacements(const CoordinatorState& st);
/// Whether a failed `rank` can be respawned where its process lives on: node 0's own
/// stages by the coordinator's respawn, another node's through the node directories.
bool respawns_in_place(const CoordinatorState& st, int rank);
/// A stage of another node that keeps its snapshots to itself (remote_markers) took one
/// after `steps_done` steps when one was due (before its reply): node 0's store notes it.
void note_remote_snapshot(CoordinatorState& st, int rank, std::int64_t steps_done);
/// Without buddy copies (remote_markers): asks every stage of another node whose copy of
/// its snapshot of `steps_done` node 0's store lacks for one (CopySnapshot; it arrives at
/// node 0's keeper, which puts it in the store: the caller polls). Returns the ranks asked.
/// A stage that cannot send its copy fails; without a restart budget the run fails,
/// `purpose` naming what asked (snapshot_copies.cpp).
std::vector<int> ask_for_copies(Self* self, std::int64_t steps_done, const std::string& purpose);
/// Drops rank's actor: one of this process is respawned at once; one of another process
/// is respawned there (RespawnStage), or, when its process is lost (`lost_why`: how it
/// was lost), waits for its node's replacement (coordinator_rejoin.cpp).
void replace_stage(Self* self, int rank, const std::string* lost_why);
/// Once no replacement is awaited: every stage aborts the round and loads the snapshot.
void restore_when_replaced(Self* self);

/// Node `node`'s process is lost: wait for its replacement (or fail the run).
void on_node_lost(Self* self, int node, const std::string& why);
/// A lost node's replacement announced its stages (node 0's directory).
void on_node_rejoined(Self* self, NodeStages& stages);
/// fault.rejoin_timeout_s after node `node` was lost in recovery `generation`.
void on_rejoin_deadline(Self* self, int node, std::uint64_t generation);

/// Every stage actor's train actions of `plan`: each replica runs its stage's (the eval
/// plans: eval_wave_plans).
std::vector<std::shared_ptr<const std::vector<sched::Action>>> train_plans_of(const JobPlan& plan);

/// A move onto another layout under way (issue 44; coordinator_relayout.cpp).
struct Relaying {
  ElasticChoice choice;                 // the layout, its plan and its actors' nodes
  std::vector<int> nodes;               // the nodes it runs on (Relayout's)
  std::int64_t steps_done = 0;          // S: the step every new actor restores
  std::vector<StageStateSnapshot> cut;  // S's states, by actor of the new layout
  std::vector<StageActor> also_end;     // actors that end with the old layout's (a joined node's first)
  // A shrink: the lost nodes it gives up on (CoordinatorState::awaiting before it), awaited
  // again when the move is abandoned before its actors take over.
  std::map<int, AwaitedNode> given_up;
  std::uint32_t generation = 0;         // the layout's (Relayout::generation)
  bool took_over = false;               // the coordinator holds the new layout's actors
  // When the move began (the caller's choice of layout, then the cut), the Relayout was
  // sent, the new actors were up, and they were restored: the row's phases_ms.
  std::chrono::steady_clock::time_point began, sent, spawned, restored;
  std::function<void()> done;           // every new actor restored
  std::function<void(const std::string&)> failed;  // why it could not be done
};
/// Moves the job onto r->choice (coordinator_relayout.cpp); then r->done, or r->failed.
/// REQUIRES: the generation bumped and the phase recovering; r->cut cut for the plan.
void relayout_job(Self* self, std::shared_ptr<Relaying> r);
/// A node of the move under way (st.moving) is lost (`why`): the move is void. The
/// generation is bumped (its answers, late actors and restores are ignored; node 0's
/// directory ends the actors it spawned), and the job stays where the move left it:
/// before its actors took over, on the old layout (the nodes the move gave up on are
/// awaited again; a grow's joined nodes are told they were not taken in), after, on the
/// new one with its state of step S in node 0's store. The caller then treats the loss
/// as any (on_node_lost): at its deadline the job shrinks from node 0's store.
void abandon_move(Self* self, int lost_node, const std::string& why);
/// The phases (replan_event.hpp) of a move that began `waited_since` (the loss's
/// detection, or a node's join), from r's times. REQUIRES: r is restored.
ReplanPhases relayout_phases(const Relaying& r, std::chrono::steady_clock::time_point waited_since);

/// Issue 44's shrink (coordinator_shrink.cpp), at the rejoin deadline of `lost_node`: when
/// fault.shrink and the job allow it, the nodes present take the job on the layout
/// choose_layout gives them, and the run goes on by itself (returns empty); else why the
/// job cannot shrink, which the caller adds to the run's failure.
std::string shrink_onto_present_nodes(Self* self, int lost_node);

/// Issue 44's grow (coordinator_grow.cpp): a node not in the shrunk layout joined (node
/// 0's directory connected its channels); it is taken in at a boundary fault.grow allows.
void on_node_joined(Self* self, NodeStages& stages);
/// Whether a node that joined is taken in at the boundary after step st.step (`checkpointed`:
/// a checkpoint was taken there).
bool grow_due(const CoordinatorState& st, bool checkpointed);
/// The grow at the boundary where `steps_done` steps are done: once node 0's store holds
/// every stage's snapshot of it (polled, up to restarts.copy_wait; without buddy copies
/// asked of the other nodes' stages first: ask_for_copies), the layout of the nodes
/// present and joined, its state cut from those snapshots, the joined row; then the run goes
/// on from that boundary. A grow that cannot be done now goes on without it.
void grow_at_boundary(Self* self, std::int64_t steps_done, int polls = 0);
/// Ends the actors of nodes that joined and were not taken in (the run ended): `reason`.
void end_joined(Self* self, const caf::error& reason);

/// Before the first plan when the run keeps snapshots: every stage snapshots its starting
/// state (so a failure in the first step can roll back); then `then` runs.
void take_first_snapshot(Self* self, std::function<void()> then);

}  // namespace conveyor::coordinator_flow
