#include "actors/stage/stage_remote.hpp"

#include <fmt/format.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "actors/messages/edge_tags.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/payload_transfer.hpp"

namespace conveyor {
namespace {

template <class M>
std::string edge_text(const M& m) {
  return fmt::format("{} for {} step {} micro-batch {} from model stage {} to model stage {}",
                     pipe_kind_name(m.kind), phase_name(m.phase), m.step, m.micro_batch,
                     m.from_model_stage, m.to_model_stage);
}

// Both ends of an edge are stage actors of one replica: the receiver names the sender's
// replica by its own.
template <class M>
std::uint64_t tag_of(const M& m, const Job& job, int rank) {
  return pipe_tag(m.kind == PipeKind::activation, m.round, m.micro_batch, m.from_model_stage,
                  m.to_model_stage, job.plan.replica_layout().replica_of(rank),
                  job.plan.placement.model_stages());
}

// Channel callbacks hold the stage weakly: a callback still queued in the channel when
// the stage ends must not keep the actor (and through its state, the channel) alive.
template <class Message>
void tell(const caf::weak_actor_ptr& stage, Message m) {
  if (auto strong = stage.lock()) caf::anon_send(caf::actor_cast<StageActor>(strong), std::move(m));
}

caf::weak_actor_ptr weak(StageSelf* self) { return caf::actor_cast<caf::weak_actor_ptr>(self); }

}  // namespace

void send_over_channel(StageSelf* self, int dest, PipeMessage m) {
  auto& st = self->state;
  const StageLinks& links = *st.links;
  RemoteChannel& channel = links.channel_to(links.node_of_rank.at(dest));
  PipeHeader header{m.kind,           m.round,         m.step,
                    m.phase,          m.micro_batch,   m.from_model_stage,
                    m.to_model_stage, m.tensor.shape().dims(), m.tensor.dtype(),
                    m.trace_id};
  const auto what = fmt::format("stage {}: sending {} over {}", st.worker->rank(),
                                edge_text(m), channel.name());
  channel.send(tag_of(m, *st.job, st.worker->rank()), m.tensor, links.timeout,
               [me = weak(self), what, round = m.round](Tensor, std::exception_ptr e) {
                 // An edge rebuilt by a recovery voided it: no failure of this stage.
                 if (e && !is_channel_reset(e))
                   tell(me, ChannelFailure{what + " failed: " + exception_text(e), round});
               });
  self->send(st.peers.ranks.at(dest), std::move(header));
}

void receive_over_channel(StageSelf* self, const PipeHeader& h) {
  auto& st = self->state;
  const StageLinks& links = *st.links;
  const Job& job = *st.job;
  const int rank = st.worker->rank();
  const int model_stages = job.plan.placement.model_stages();
  if (h.from_model_stage < 0 || h.from_model_stage >= model_stages ||
      h.to_model_stage < 0 || h.to_model_stage >= model_stages)
    throw std::runtime_error(fmt::format("stage {}: header of {}: no such model stage "
                                         "(the model has {})",
                                         rank, edge_text(h), model_stages));
  const Shape expected{job.plan.data.micro_batch_size, job.plan.model.seq_len, job.plan.model.d_model};
  const Shape got(h.shape);
  if (got != expected || h.dtype != job.plan.data.activation_dtype)
    throw std::runtime_error(fmt::format("stage {}: header of {}: expected {} {}, got {} {}",
                                         rank, edge_text(h),
                                         dtype_name(job.plan.data.activation_dtype), expected.str(),
                                         dtype_name(h.dtype), got.str()));
  // The sender: the stage actor of this replica that holds the model stage.
  const int from_rank = job.plan.actor_of_model_stage(rank, h.from_model_stage);
  RemoteChannel& channel = links.channel_to(links.node_of_rank.at(from_rank));
  const auto what = fmt::format("stage {}: {} (edge {}) over {} did not arrive", rank,
                                edge_text(h), std::min(h.from_model_stage, h.to_model_stage),
                                channel.name());
  channel.receive(
      tag_of(h, job, rank), got, h.dtype, links.timeout,
      [me = weak(self), h, what](Tensor t, std::exception_ptr e) {
        if (e) {
          if (!is_channel_reset(e))
            tell(me, ChannelFailure{what + ": " + exception_text(e), h.round});
          return;
        }
        tell(me, PipeMessage{h.kind, h.round, h.step, h.phase, h.micro_batch, h.from_model_stage,
                             h.to_model_stage, std::move(t), h.trace_id});
      });
}

void send_weights_payload(StageSelf* self, const WeightsReply& weights) {
  auto& st = self->state;
  const int leader = st.peers.keeper_node;
  if (!st.links || st.links->node == leader) return;
  int first = 0;  // tags count the reply's tensors across its model stages
  for (const auto& m : weights.model_stages) {
    send_payloads(
        st.links->channel_to(leader), m.tensors,
        [rank = weights.rank, first](int i) { return weight_tag(rank, first + i); },
        st.links->timeout,
        fmt::format("stage {}: the final weights of model stage {} to node {}", weights.rank,
                    m.model_stage, leader));
    first += static_cast<int>(m.tensors.size());
  }
}

CopyRoute copy_route(const PeerTable& peers, int node) {
  if (node != peers.keeper_node) return {peers.keeper, peers.keeper_node};
  if (peers.standby_node < 0 || peers.standby_node == node) return {};
  return {peers.standby_keeper, peers.standby_node};
}

void send_snapshot_copy(StageSelf* self, const CopyRoute& to, std::int64_t steps_done,
                        const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps) {
  auto& st = self->state;
  const int rank = st.worker->rank();
  SnapshotCopy copy{rank, steps_done, optimizer_steps, tensors, 0, st.round};
  // A copy that fails to arrive is not the stage's failure: the keeper keeps the older ones.
  send_payloads(
      st.links->channel_to(to.node), copy.tensors,
      [rank, round = st.round, steps_done](int i) { return snapshot_tag(rank, round, steps_done, i); },
      st.links->timeout,
      fmt::format("stage {}: the copy of its snapshot after step {} to node {}", rank, steps_done, to.node));
  self->send(to.keeper, std::move(copy));
}

void receive_snapshot_copy(StageSelf* self, SnapshotCopy copy) {
  auto& st = self->state;
  if (!st.links) throw std::logic_error("a snapshot copy to restore, but this stage has no channels");
  const int keeper_node = st.peers.keeper_node;
  if (st.links->node == keeper_node) {  // from its own node's keeper: the tensors came along
    self->send(self, CopyArrived{std::move(copy), std::string()});
    return;
  }
  auto header = SnapshotCopy{copy.rank, copy.steps_done, copy.optimizer_steps, {}};
  receive_payloads(st.links->channel_to(keeper_node), std::move(copy.tensors), st.links->timeout,
                   [me = weak(self), header](std::vector<NamedTensor> tensors, std::exception_ptr e) {
                     CopyArrived arrived{header, e ? exception_text(e) : std::string()};
                     arrived.copy.tensors = std::move(tensors);
                     tell(me, std::move(arrived));
                   });
}

}  // namespace conveyor
