// checkpoint.writers every_node: a checkpoint across processes for which every node
// writes its own stages' shards. Node 0's coordinator needs no copy of another node's
// state, only to know that node holds the step (its snapshot's marker, or a buddy copy):
// it prepares the staging folder (the hook), sends each remote stage WriteShard, and
// hands the writer a snapshot whose remote shards it awaits (remote_shards.hpp). The
// replies go to node 0's keeper, not here: a checkpoint at a stop is made durable on this
// actor's thread (CheckpointHook::take), which must not wait for messages to itself.
#include <fmt/format.h>

#include "actors/checkpoint/remote_shards.hpp"
#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/messages/recovery_messages.hpp"

namespace conveyor::coordinator_flow {

bool remote_shards_written_by_nodes(const CoordinatorState& st) {
  if (!st.restarts.remote_shards || !st.job->services.snapshots || st.job->plan.shards_optimizer_state()) return false;
  // Replica 0's stages hold the checkpoint: some of them on another node.
  for (std::size_t r = 0; r < st.job->plan.placement.ranks.size(); ++r)
    if (is_remote(st, static_cast<int>(r))) return true;
  return false;
}

std::optional<std::pair<std::vector<checkpoint::StageShard>, std::int64_t>> shards_written_by_nodes(
    Self* self, std::int64_t steps_done) {
  auto& st = self->state;
  const int ranks = static_cast<int>(st.job->plan.placement.ranks.size());  // replica 0's
  // Not every node has reported this step yet (a marker or a copy of another node's).
  for (int r = 0; r < ranks; ++r)
    if (!st.job->services.snapshots->get(r, steps_done)) return std::nullopt;
  // AdamW's step count from rank 0's snapshot: stages go to nodes in order, so rank 0
  // runs here, beside the coordinator.
  const auto first = st.job->services.snapshots->get(0, steps_done);
  if (is_remote(st, 0) || first->marker) return std::nullopt;
  const auto target = st.checkpoints->stage_remote_shards(steps_done);
  std::vector<checkpoint::StageShard> shards;
  for (int r = 0; r < ranks; ++r) {
    if (is_remote(st, r)) {
      shards.push_back(checkpoint::awaited_shard(st.restarts.remote_shards, target, r,
                                                 st.job->plan.remote_shard_timeout));
      // The stage answers once it queued the write; a stage that cannot (gone, or it
      // failed) fails its shard now rather than at the end of node 0's wait. A node lost
      // just before the request reached its proxy: the down message came first (it was
      // enqueued as the proxy died), so the node is awaited or given up on by now, and its
      // shard fails as lost with it (the run recovers from the loss, or shrinks without
      // it), not as this run's own failure. The node is the one asked: a re-layout since
      // may have given rank r to another.
      const int node = st.restarts.node_of_rank.at(static_cast<std::size_t>(r));
      if (target.error.empty())
        self->request(st.stages.at(static_cast<std::size_t>(r)), caf::infinite,
                      WriteShard{steps_done, target.staging, target.token})
            .then([](bool) {},
                  [book = st.restarts.remote_shards, token = target.token, r, node, self](caf::error& e) {
                    const auto why = fmt::format("stage {} did not take the request: {}", r, stage_text(self, e, r));
                    if (self->state.awaiting.count(node)) {
                      std::vector<int> node_of_stage(static_cast<std::size_t>(r) + 1, -1);
                      node_of_stage.back() = node;
                      book->fail_node(node, node_of_stage, why);
                      return;
                    }
                    book->report(token, r, std::nullopt, why);
                  });
      continue;
    }
    const auto held = st.job->services.snapshots->get(r, steps_done);
    checkpoint::StageShard local;
    local.stage = r;
    local.produce = [held] { return held->tensors(); };
    shards.push_back(std::move(local));
  }
  return std::make_pair(std::move(shards), first->optimizer_steps());
}

}  // namespace conveyor::coordinator_flow
