#pragma once
// The RemoteChannel to one peer process whose pipeline edges with this process join GPU
// stages: activations and gradients of those edges go over NCCL (one communicator per
// directed edge, nccl_channel.hpp), everything else (the final weights, host tensors)
// over `host`, the UCX channel to the same peer.
//
//   auto ch = std::make_shared<NcclRemoteChannel>(ucx_to_node_1, "node 1");
//   ch->add_sender(TagKind::activation, 3, connect_nccl_sender(store, act_3_to_4));
//   ch->add_receiver(TagKind::gradient, 3, connect_nccl_receiver(store, grad_4_to_3));
//   ch->send(pipe_tag(...), activation, timeout, done);   // → the "act 3->4" communicator
//
// Routing: a message goes over NCCL when its tag's (kind, edge) names an edge added here;
// NCCL matches messages by order, not by tag, so the n-th receive of an edge gets its n-th
// send: both sides must post them in the same order (the stage actors do: one sender, one
// receiver per edge, and CAF keeps the order of the headers that trigger the receives).
// Completion: `done` runs on this channel's thread once the operation has completed on the
// GPU (a send's bytes have left, a receive's have arrived; the received tensor also
// carries a ready event on the receive stream), or with NcclError / NcclTimeout when the
// edge failed, or the operation did not complete within its timeout (the communicator is
// then aborted, and every later operation on that edge fails at once). A pending
// operation is never completed twice.
// Thread-safety: every member may be called from any thread; add_* before the first send
// or receive on that edge.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "transport/nccl/nccl_channel.hpp"
#include "transport/remote_channel.hpp"
#include "transport/ucx/ucx_tag.hpp"

namespace conveyor {

class NcclRemoteChannel final : public RemoteChannel {
 public:
  /// `host` carries what no NCCL edge here carries; `peer_name` names the peer ("node 1").
  NcclRemoteChannel(std::shared_ptr<RemoteChannel> host, std::string peer_name);
  /// Stops the thread; operations still pending are dropped without calling `done` (as
  /// UcxHub does). An edge with unfinished work is aborted at once (the run failed: its
  /// peer may never take part again); the others end as NcclEdgeStream does.
  ~NcclRemoteChannel() override;
  NcclRemoteChannel(const NcclRemoteChannel&) = delete;
  NcclRemoteChannel& operator=(const NcclRemoteChannel&) = delete;

  /// Messages of `kind` on pipeline edge `edge` (the tag's edge field) leave over `tx`.
  void add_sender(TagKind kind, std::int64_t edge, std::unique_ptr<NcclSendChannel> tx);
  /// Messages of `kind` on `edge` arrive over `rx`.
  void add_receiver(TagKind kind, std::int64_t edge, std::unique_ptr<NcclRecvChannel> rx);

  void send(std::uint64_t tag, const Tensor& tensor, std::chrono::milliseconds timeout,
            Done done) override;
  void receive(std::uint64_t tag, const Shape& shape, DType dtype,
               std::chrono::milliseconds timeout, Done done) override;
  /// "nccl+ucx to node 1".
  std::string name() const override { return "nccl+ucx to " + peer_name_; }

  /// NCCL edges added (both directions).
  std::size_t edges() const;

  /// A recovery: the edge's communicator is aborted (kernels stuck on a peer that failed
  /// end), every operation still queued on it fails with ChannelReset, and `tx` / `rx` (a
  /// new communicator, the next generation) carries the edge from now on. Throws
  /// std::logic_error for an edge not added in that direction.
  void replace_sender(TagKind kind, std::int64_t edge, std::unique_ptr<NcclSendChannel> tx);
  void replace_receiver(TagKind kind, std::int64_t edge, std::unique_ptr<NcclRecvChannel> rx);
  /// The first half of a recovery's rebuild, for every edge at once: aborts each
  /// communicator and fails what is queued on it with ChannelReset (so that kernels stuck
  /// on a peer that failed end before new communicators are made).
  void abort_edges();

 private:
  struct Side;
  using Key = std::pair<int, std::int64_t>;  // (TagKind, edge)
  Side* side_for(std::uint64_t tag) const;
  void start(Side& side, std::uint64_t tag, const Tensor* to_send, const Shape& shape, DType dtype,
             std::chrono::milliseconds timeout, Done done);
  void run();
  bool progress(Side& side);
  Side& existing(TagKind kind, std::int64_t edge, bool sending);
  void reset(Side& side);

  std::shared_ptr<RemoteChannel> host_;
  std::string peer_name_;
  std::map<Key, std::unique_ptr<Side>> sides_;  // guarded by mutex_ for insertion
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::size_t pending_ = 0;  // operations not yet completed, all sides (mutex_)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace conveyor
