#pragma once
// Messages of a recovery (stage restart, NaN rollback, a lost process rejoining):
//   C → S_r   TakeSnapshot{k}          before the first step: snapshot the starting state
//   S_r → C   SnapshotTaken
//   C → S_r   RestoreStage{k, fence}   drop the current plan, every message of a round
//                                      <= fence, and the gradients; load snapshot k
//   S_r → C   StageRestored
//   watchdog → C   (stage_hang_atom, culprit, verdict)   a hang to recover from
// Across processes (actors/cluster/snapshot_keeper.hpp; node 0 is every stage's buddy):
//   S_r → K0  SnapshotCopy             a stage of node k > 0 after each snapshot: node 0
//                                      keeps a copy (the tensors' bytes on the channel)
//                                      (fault.buddy_copies on)
//   C → S_r   CopySnapshot{S}          fault.buddy_copies off: a checkpoint (or a grow)
//                                      at step S asks a stage of node k > 0 for the SnapshotCopy of
//   S_r → C   SnapshotTaken            its snapshot S (it answers once the copy is sent)
//   C → S_r   WriteShard{S, folder, token}   checkpoint.writers every_node: a stage of node
//                                      k > 0 writes its shard of snapshot S itself, into
//                                      node 0's staging folder, on its node's write queue
//                                      (it answers `true` once the write is queued)
//   Q_k → K0  ShardWritten             ... and the queue reports it (its manifest entry,
//                                      or why it failed); K0 answers once it noted it
//   C → K0    RestoreRejoined{r, S}    restore rank r of a process that rejoined ...
//   K0 → S_r  RestoreFromCopy          ... from node 0's copy (delegated: S_r answers C)
//   C → K0    RestoreFromCheckpoint{r, S, path}   fault.buddy_copies off: a lost node's
//                                      replacement sends every rank back to checkpoint S,
//   K0 → S_r  RestoreFromCopy          which the keeper reads (delegated: S_r answers C)
//   C → D0 → Dk  RespawnStage{r}       a failed stage of node k whose process lives on
//                                      is respawned there (node directories)
//   D0 → C    NodeStages               a lost node's replacement (node_directory.hpp)
//   C → D0 → Dk  RebuildChannels{g}    GPU stages across processes: every node's NCCL
//                                      edges get new communicators before the restore
//   C → D0 → Dk  Relayout{g, nodes, fence}   issue 44's shrink: every node present spawns
//                                      the stage actors the layout of those nodes gives it
//                                      (choose_layout, the same on every node); Dk answers
//                                      NodeStages, D0 the coordinator every actor by rank
//   C → D0    (relayout_void_atom, g)  a node was lost during the move of generation g:
//                                      D0 ends the actors it gathered for it (and those
//                                      answered later) and answers the void move's request
//   D0 → C    (node_lost_atom, k, why)  a node D0 forwarded a Relayout to is unreachable
//                                      (sent before D0's failed answer: C abandons the move)
//   Dj → D0 → C  (node_joined_atom, NodeStages)   issue 44's grow: a node not in the
//                                      shrunk layout announced its stages; D0 connected
//                                      every node's channels to it first; C takes it in
//                                      at a boundary fault.grow allows (a Relayout again)
// The first four, CopySnapshot, WriteShard, ShardWritten and the copies cross processes: they are wire types (wire_format.hpp).
#include <caf/all.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages/wire_format.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor {

struct TakeSnapshot {
  std::int64_t steps_done = 0;
};

struct SnapshotTaken {
  int rank = 0;
  std::int64_t steps_done = 0;
};

struct RestoreStage {
  std::int64_t steps_done = 0;   // the snapshot to load (SnapshotStore)
  std::int64_t round_fence = 0;  // rounds up to this one are void; the next plan is fence + 1
};

struct StageRestored {
  int rank = 0;
  std::int64_t steps_done = 0;
};

/// A stage's state after `steps_done` steps (StageModel::capture_state() names). Across
/// processes the tensors are PendingPayload placeholders whose bytes follow on the
/// channel under snapshot_tag(rank, round, steps_done, index) (edge_tags.hpp).
struct SnapshotCopy {
  int rank = 0;
  std::int64_t steps_done = 0;
  std::int64_t optimizer_steps = 0;
  std::vector<NamedTensor> tensors;
  /// 0: a copy on its way to node 0's keeper (snapshot_tag); > 0: a restore the keeper
  /// hands a stage, numbered by the keeper (restore_tag), so that two restores of one rank
  /// and step (a move abandoned, then the next) never share tags.
  std::uint32_t series = 0;
  /// A copy on its way to node 0: the sender's plan round when it sent it (its tags'; a
  /// replayed step's copy is sent in a later round than the first run's).
  std::int64_t round = 0;
};

/// The transport tag of tensor `index` of `copy` (edge_tags.hpp).
inline std::uint64_t copy_tag(const SnapshotCopy& copy, int index) {
  return copy.series ? restore_tag(copy.rank, copy.series, index) : snapshot_tag(copy.rank, copy.round, copy.steps_done, index);
}

/// To a stage of a node other than 0 whose snapshots node 0 does not copy as they are
/// taken (fault.buddy_copies off): send node 0's keeper a SnapshotCopy of the snapshot
/// after `steps_done` steps, which it holds in its own process. The reply, a
/// SnapshotTaken, comes once the copy is on its way; the keeper stores it once it arrived.
struct CopySnapshot {
  std::int64_t steps_done = 0;
};

/// To a stage of a node other than 0 (checkpoint.writers every_node): write your shard
/// of the snapshot after `steps_done` steps into `staging` (actors/checkpoint/
/// staged_shards.hpp) for the attempt `token`. The reply, `true`, comes once the write is
/// queued: it runs on the node's queue, which reports to node 0's keeper (ShardWritten),
/// failures included.
struct WriteShard {
  std::int64_t steps_done = 0;
  std::string staging;
  std::string token;
};

/// A node's report of one shard it wrote (or could not write) for WriteShard: the
/// manifest entry's fields, or `error`. To node 0's keeper, which answers `true` once it
/// noted it (false: nobody expected that shard).
struct ShardWritten {
  int rank = 0;
  std::string token;
  std::string error;  // empty when written
  std::string file;
  std::uint64_t bytes = 0;
  std::string sha256;
  std::vector<std::string> tensors;
};

/// To a stage of a process that rejoined: abort as RestoreStage does, then load `copy`.
struct RestoreFromCopy {
  std::int64_t round_fence = 0;
  SnapshotCopy copy;
};

/// To a node's directory (node 0's forwards it): replace the failed actor of `rank`, a
/// stage of that node, by a new one fenced at `round_fence`; the reply is its handle.
struct RespawnStage {
  int rank = 0;
  std::int64_t round_fence = 0;
};

/// To node 0's directory (`forward`: it passes it on to every node in `nodes`): the job
/// moves onto the layout of the nodes `nodes` (actors/plan/elastic_plan.hpp: choose_layout,
/// which every node computes alike from the plan it started with): each node spawns that
/// layout's stage actors of its own, fenced at `round_fence`, and answers NodeStages; node
/// 0's directory answers with every actor by rank. `generation`: the layout's, 1 for the
/// first re-plan (the run's plan.json says it).
struct Relayout {
  std::uint32_t generation = 0;
  std::vector<int> nodes;
  std::int64_t round_fence = 0;
  bool forward = false;
};

/// To node 0's directory (`forward`: it passes it on to every other node's): rebuild this
/// node's NCCL edges with communicators of `generation` (channel_setup.hpp); the reply
/// comes once every node's are rebuilt.
struct RebuildChannels {
  std::uint32_t generation = 0;
  bool forward = false;
};

/// From the hang watchdog under fault.policy restart: the stage its verdict blames (-1:
/// none in particular) and the verdict.
using stage_hang_atom = caf::atom_constant<caf::atom("stagehang")>;
/// To the coordinator: the process of node `node` is gone (its silence at the store, or
/// its connection); `why` in words.
using node_lost_atom = caf::atom_constant<caf::atom("nodelost")>;
/// The coordinator to itself, fault.rejoin_timeout_s after a node was lost.
using rejoin_deadline_atom = caf::atom_constant<caf::atom("rjdeadline")>;
/// The coordinator to itself: look again whether every node's snapshot of a checkpoint's
/// step has arrived (coordinator_actor.cpp capture_state).
using capture_retry_atom = caf::atom_constant<caf::atom("capretry")>;
/// Node 0's directory to the coordinator (issue 44's grow): a node that a shrink gave up
/// on, or a new process with its node rank, joined (its NodeStages: the stage actors it
/// started with, which the grow ends); channels to it are connected already.
using node_joined_atom = caf::atom_constant<caf::atom("nodejoined")>;
/// The coordinator to node 0's directory: the move onto layout generation `g` (a
/// Relayout) is void, a node was lost during it (coordinator_relayout.cpp).
using relayout_void_atom = caf::atom_constant<caf::atom("relayvoid")>;
/// To node 0's directory, from the coordinator: node `node` (an int), kept in the job
/// without a stage after a re-plan, is lost (issue 44): forget it, and tell the processes
/// that join from now on the layout's nodes without it (they would dial it).
using forget_node_atom = caf::atom_constant<caf::atom("forgetnode")>;
/// The coordinator to itself: look again whether node 0's store holds every stage's
/// snapshot of the boundary a grow waits at (coordinator_grow.cpp).
using grow_retry_atom = caf::atom_constant<caf::atom("growretry")>;

template <class Inspector, class T>
wire::both_t<Inspector, T, TakeSnapshot> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("TakeSnapshot"), x.steps_done);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, SnapshotTaken> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("SnapshotTaken"), x.rank, x.steps_done);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, CopySnapshot> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("CopySnapshot"), x.steps_done);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, WriteShard> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("WriteShard"), x.steps_done, x.staging, x.token);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, ShardWritten> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("ShardWritten"), x.rank, x.token, x.error, x.file, x.bytes, x.sha256,
           x.tensors);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, RestoreStage> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("RestoreStage"), x.steps_done, x.round_fence);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, StageRestored> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("StageRestored"), x.rank, x.steps_done);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, RespawnStage> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("RespawnStage"), x.rank, x.round_fence);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, Relayout> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("Relayout"), x.generation, x.nodes, x.round_fence, x.forward);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, RebuildChannels> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("RebuildChannels"), x.generation, x.forward);
}

template <class Inspector>
wire::save_t<Inspector> inspect(Inspector& f, const SnapshotCopy& x) {
  auto meta = wire::meta_of(x.tensors);
  return f(caf::meta::type_name("SnapshotCopy"), x.rank, x.steps_done, x.optimizer_steps, x.series, x.round,
           meta.names, meta.shapes, meta.dtypes);
}

template <class Inspector>
wire::load_t<Inspector> inspect(Inspector& f, SnapshotCopy& x) {
  wire::TensorListMeta meta;
  auto done = caf::meta::load_callback([&]() -> caf::error {
    return wire::placeholders(
        meta, [&](int i) { return copy_tag(x, i); }, &x.tensors);
  });
  return f(caf::meta::type_name("SnapshotCopy"), x.rank, x.steps_done, x.optimizer_steps, x.series, x.round,
           meta.names, meta.shapes, meta.dtypes, done);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, RestoreFromCopy> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("RestoreFromCopy"), x.round_fence, x.copy);
}

/// A stage to itself: the bytes of a copy to restore from (RestoreFromCopy) have arrived
/// (or failed: `error`). Local: it holds the tensors.
struct CopyArrived {
  SnapshotCopy copy;
  std::string error;
};

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::CopyArrived)
