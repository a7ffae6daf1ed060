#pragma once
// The host implementation of GradientAllReduce: Gloo's ring all-reduce over TCP, for
// stages whose gradients are f32 host buffers (the CPU backend).
//
// Building one (every rank of the group, each in its own process or thread):
// 1. agree on the layout through the store (layout_agreement.hpp): finds missing ranks
//    and ranks that bucket differently;
// 2. Gloo connects a full mesh of TCP pairs, finding the addresses through the store
//    (gloo_rendezvous_store.hpp, keys under the group's prefix).
// Both are bounded by `timeout`; the constructor throws CollectiveTimeout naming the group,
// this rank and the missing ranks, or CollectiveError.
//
// Running buckets: start() copies nothing and returns at once; one worker thread per
// group runs the buckets in start order: packs the buffers into the bucket's flat array
// (a bucket of one buffer is reduced in place), runs gloo::allreduce (ring, sum, the
// group's timeout as its end-to-end bound), and writes the sum, or the sum divided by R,
// back. Ring all-reduce leaves each element's final sum on one rank and copies it to the
// others, so all ranks hold the same bits; the order of the additions depends only on R
// and the bucket's size, so runs repeat bit for bit.
// Failures: a peer that is gone or late fails the bucket after at most `timeout` with
// CollectiveTimeout/CollectiveError naming the group, this rank and the bucket; the group
// is then broken (buckets queued behind fail at once, later start() throws) and must be
// rebuilt on every rank with the next generation.
// Cancellation (options.cancellation, replica_groups.hpp): a frozen peer (SIGSTOP) keeps
// its sockets open, so nothing fails before `timeout`; when a recovery cancels the group's
// generation (group_cancellation.hpp), a watcher thread, which looks every 50 ms while a
// bucket or an all-gather is queued or running, shuts the group's connections down
// (gloo_peer_sockets.hpp): the operation in Gloo fails at once, on this rank and on the
// peers. What must hold: an operation in flight or queued when its generation is
// cancelled fails within ~100 ms with a CollectiveError that says so, naming the group and
// the bucket (even if Gloo returned: the peers may not have their part); the group is then
// broken; a start() or all-gather of a cancelled generation throws at once (the NCCL
// group instead returns a handle that fails at its first wait: same outcome); a group of a
// generation not cancelled is never touched. Remaining gap, from Gloo: a wait for a
// message of which part was received when the connection ended is not woken (Gloo fails
// the operations pending on a pair, not the one being read) and ends at `timeout`; seen
// only when both ends were mid-transfer (scratch runs: 1 in 40), never with a frozen peer,
// whose sent bytes all arrive (0 in 150).
// A peer's death never ends this process: the threads that write through Gloo block
// SIGPIPE (sigpipe_block.hpp), so a write to its socket fails the bucket instead.
// A group of size 1 connects nothing; its buckets complete at once, unchanged.
//
// Thread-safety: start() from one thread at a time (see gradient_all_reduce.hpp); the
// handles from any thread. The destructor fails the buckets not yet run and waits for the
// running one (bounded by `timeout`; at once when its generation was cancelled, even just
// before the destructor began).
#include <chrono>
#include <memory>
#include <string>

#include "transport/collective/gradient_all_reduce.hpp"
#include "transport/collective/group_cancellation.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

struct GlooGroupOptions {
  StageGroup group;
  /// Every bucket the stage will start; f32 only. The same on every rank.
  BucketLayout layout;
  Reduction reduction = Reduction::average;
  /// This rank's address that its peers can reach (the TCP listener binds to it): this
  /// host's address on the job's network; loopback only when every rank is on this host.
  std::string listen_address = "127.0.0.1";
  /// Bound on joining the group and on each bucket's all-reduce.
  std::chrono::milliseconds timeout{30'000};
  /// When set (the process's stage groups, replica_groups.hpp): once this group's
  /// generation is cancelled (group_cancellation.hpp), the bucket or all-gather in flight
  /// and the buckets queued fail within ~100 ms with a CollectiveError, instead of
  /// waiting up to `timeout` for a peer that does not come, and start() refuses. Outlives
  /// the group.
  const GroupCancellation* cancellation = nullptr;
};

class GlooGradientAllReduce final : public GradientAllReduce {
 public:
  /// Uses `store` only while constructing (it may be shared by the ranks of one process).
  GlooGradientAllReduce(RendezvousClient& store, GlooGroupOptions options);
  ~GlooGradientAllReduce() override;
  GlooGradientAllReduce(const GlooGradientAllReduce&) = delete;
  GlooGradientAllReduce& operator=(const GlooGradientAllReduce&) = delete;

  /// Queues `bucket` for the worker thread. Throws as GradientAllReduce::start says.
  std::unique_ptr<AllReduceHandle> start(const GradientBucket& bucket) override;
  /// Gloo's allgatherv over the buffers packed into one flat array (see the base class).
  void all_gather(const std::vector<GradientBuffer>& buffers,
                  const std::vector<std::size_t>& counts) override;

  const StageGroup& group() const override;
  const BucketLayout& layout() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
