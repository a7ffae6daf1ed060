#pragma once
// The stage groups of a data-parallel run (parallel.data: R, issue 9): one group per
// pipeline stage, named "stage <s>", whose ranks are that stage's R replicas (rank =
// replica): Gloo over TCP for CPU stages, an NCCL communicator for GPU stages (each rank on
// its replica's GPU, with a stream of its own for the all-reduces); and the group of two
// holders of the tied embedding (model.tie_embeddings). The ranks find each other through
// a rendezvous store:
//  - in one process, a store of this process alone: a loopback server on an ephemeral port
//    with a random token, so two jobs on one host never meet;
//  - over several processes (actors/runtime/run_job.hpp), the job's own store, reached
//    through a connection of this process's groups' own (the process's main connection
//    blocks in waits and barriers while the groups form); each group's keys sit under its
//    prefix (stage_group.hpp), apart from the job's. Gloo listens on this node's address.
// Every rank of a process uses the one client (the groups poll it and never block on it,
// transport/collective/store_polling.hpp says why that is safe).
//
// What must hold: the R stage actors of a stage call join() at the same time on threads of
// their own (each call blocks until all R have joined or `timeout` passed), with the same
// layout and generation. The stages join generation 0 when they start; after every
// recovery (fault.policy restart, fault.on_nan rollback) each stage leaves its group and
// every rank joins the coordinator's next generation (fresh store keys, new connections),
// whether or not its own group failed: a respawned rank needs a new group anyway, and a
// group that saw a failed bucket is broken for good (gradient_all_reduce.hpp). The tied
// embedding's groups of two follow the same generations.
// Thread-safety: join() from any thread.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/tensor/device.hpp"
#include "transport/collective/gradient_all_reduce.hpp"
#include "transport/collective/group_cancellation.hpp"
#include "transport/rendezvous/client.hpp"
#include "transport/rendezvous/server.hpp"

namespace conveyor {

class ReplicaGroups {
 public:
  /// Starts the store. REQUIRES: replicas >= 1. Throws RendezvousError when it cannot.
  ReplicaGroups(int replicas, std::chrono::milliseconds timeout);
  /// Joins the job's store at `store`; Gloo listens on `listen_address` (this node's
  /// address as the other nodes reach it). REQUIRES: replicas >= 1 (one: the tied
  /// embedding's groups only). Throws RendezvousError.
  ReplicaGroups(int replicas, std::chrono::milliseconds timeout,
                const RendezvousClientOptions& store, std::string listen_address);
  ~ReplicaGroups();
  ReplicaGroups(const ReplicaGroups&) = delete;
  ReplicaGroups& operator=(const ReplicaGroups&) = delete;

  /// Rank `replica` of pipeline stage `stage`'s group of `generation`, averaging buckets of
  /// `layout` in the memory of `device` (host: Gloo; a GPU: NCCL). `size`: the group's ranks,
  /// the replicas of the layout that generation runs (a job shrunk or grown onto another
  /// count, issue 44; its key prefix names the generation, so groups of two sizes never
  /// meet); 0: replicas(). Throws CollectiveTimeout naming the replicas that did not join,
  /// CollectiveError when they declared different layouts, std::invalid_argument for a GPU
  /// in a build without CUDA or a replica outside the group.
  std::unique_ptr<GradientAllReduce> join(int stage, int replica, const BucketLayout& layout,
                                          Device device, std::uint32_t generation = 0, int size = 0);

  /// model.tie_embeddings: rank `rank` (0: the holder of the embedding's copy, 1: the
  /// head's) of replica `replica`'s group of two that sums the tied tensor's gradient,
  /// rebuilt by generation like the stage groups. Throws as join(), and
  /// std::invalid_argument when both holders are on one GPU.
  std::unique_ptr<GradientAllReduce> join_tied(int replica, int rank, const BucketLayout& layout,
                                               Device device, Device peer,
                                               std::uint32_t generation = 0);

  /// The replicas the job started with (its groups' size unless join() names another).
  int replicas() const { return replicas_; }

  /// A recovery began: every group of a generation below `generation` (the one the groups
  /// are rebuilt with) stops waiting for its buckets (group_cancellation.hpp): an NCCL
  /// group aborts its communicator, a Gloo group shuts its connections down.
  void cancel_below(std::uint32_t generation) { cancellation_.cancel_below(generation); }

 private:
  std::unique_ptr<GradientAllReduce> make_group(const StageGroup& group, const BucketLayout& layout,
                                                Device device, Reduction reduction);

  GroupCancellation cancellation_;  // of every group this object makes
  int replicas_;
  std::chrono::milliseconds timeout_;
  std::string listen_address_ = "127.0.0.1";
  std::unique_ptr<RendezvousServer> server_;  // null over the job's store
  std::unique_ptr<RendezvousClient> client_;
};

}  // namespace conveyor
