#include "actors/cluster/snapshot_keeper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <stdexcept>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/messages/edge_tags.hpp"
#include "actors/messages/payload_transfer.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"

namespace conveyor {
namespace {

using Self = KeeperActor::stateful_base<SnapshotKeeperState>;

// Receives the bytes of a copy from the node that runs its rank; then it is kept.
void keep(Self* self, SnapshotCopy copy) {
  const auto& st = self->state;
  const auto links = st.links->get();
  const int ranks = static_cast<int>(links->node_of_rank.size());
  if (copy.rank < 0 || copy.rank >= ranks || links->node_of_rank[copy.rank] == links->node) {
    log_transfer_error(fmt::format("a snapshot copy for stage {} was dropped: not a stage of another node",
                    copy.rank));
    return;
  }
  const int node = links->node_of_rank[copy.rank];
  if (st.in_flight) st.in_flight->begin();
  receive_payloads(
      links->channel_to(node), std::move(copy.tensors), links->timeout,
      [store = st.store, in_flight = st.in_flight, here = links->node, rank = copy.rank, steps = copy.steps_done,
       optimizer_steps = copy.optimizer_steps](std::vector<NamedTensor> tensors, std::exception_ptr e) {
        if (!e) {
          try {  // a re-plan may have reset the store for fewer ranks meanwhile
            store->put(rank, StageStateSnapshot{
                                 steps, {std::make_shared<TensorStateSnapshot>(std::move(tensors),
                                                                               optimizer_steps)}});
          } catch (const std::out_of_range&) {
            e = std::current_exception();
          }
        }
        if (e)
          log_transfer_error(fmt::format("node {}'s copy of stage {}'s snapshot after step {} is lost: {}", here,
                                         rank, steps, exception_text(e)));
        if (in_flight) in_flight->end();
      });
}

// Has `stage` restore `copy`: its bytes go over the channel to a stage of another node;
// a stage of this node takes the tensors with the message.
caf::result<StageRestored> hand_copy(Self* self, const StageActor& stage, std::int64_t round_fence,
                                     SnapshotCopy copy) {
  const auto links = self->state.links->get();
  const int node = links->node_of_rank.at(copy.rank);
  copy.series = ++self->state.restores;
  if (copy.series == 0) copy.series = ++self->state.restores;  // wrapped: 0 means a copy
  if (node != links->node)
    send_payloads(
        links->channel_to(node), copy.tensors,
        [rank = copy.rank, series = copy.series](int i) { return restore_tag(rank, series, i); },
        links->timeout, fmt::format("restoring stage {} on node {}", copy.rank, node));
  auto promise = self->make_response_promise<StageRestored>();
  promise.delegate(stage, RestoreFromCopy{round_fence, std::move(copy)});
  return promise;
}

bool known_rank(const Self* self, int rank) {
  return rank >= 0 && rank < static_cast<int>(self->state.links->get()->node_of_rank.size());
}

caf::result<StageRestored> restore(Self* self, const RestoreRejoined& r) {
  const auto& st = self->state;
  const auto steps = r.restore.steps_done;
  if (!known_rank(self, r.rank)) return failure(fmt::format("no stage {} to restore", r.rank));
  const auto snap = st.store->get(r.rank, steps);
  if (!snap)
    return failure(fmt::format("node 0 holds no copy of stage {}'s snapshot after step {}",
                               r.rank, steps));
  return hand_copy(self, r.stage, r.restore.round_fence,
                   SnapshotCopy{r.rank, steps, snap->optimizer_steps(), snap->tensors()});
}

// The rank's shard of a checkpoint the coordinator verified: its tensors are the stage's
// snapshot tensors (global names, as SnapshotStore::shards hands them to the writer).
caf::result<StageRestored> restore(Self* self, const RestoreFromCheckpoint& r) {
  if (!known_rank(self, r.rank)) return failure(fmt::format("no stage {} to restore", r.rank));
  try {
    const auto manifest = checkpoint::read_manifest(checkpoint::posix_filesystem(), r.path);
    const auto shard = std::find_if(manifest.shards.begin(), manifest.shards.end(),
                                    [&](const checkpoint::ShardEntry& e) { return e.stage == r.shard; });
    if (shard == manifest.shards.end())
      return failure(fmt::format("checkpoint {} holds no shard of stage {}", r.path, r.shard));
    if (manifest.step != r.restore.steps_done)
      return failure(fmt::format("checkpoint {} holds step {}, not {}", r.path, manifest.step,
                                 r.restore.steps_done));
    auto tensors = read_safetensors((std::filesystem::path(r.path) / shard->file).string());
    return hand_copy(self, r.stage, r.restore.round_fence,
                     SnapshotCopy{r.rank, manifest.step, manifest.optimizer_steps, std::move(tensors)});
  } catch (const std::exception& e) {
    return failure(fmt::format("reading stage {}'s shard of checkpoint {}: {}", r.rank, r.path, e.what()));
  }
}

// A node's report of a shard it wrote: checked as any message from a peer (a rank of that
// node's, the file name its stage's, a well-formed digest) before the book takes it.
bool note_shard(Self* self, ShardWritten& w) {
  const auto& st = self->state;
  const auto drop = [&](const std::string& why) {
    log_transfer_error(fmt::format("a report of stage {}'s shard was dropped: {}", w.rank, why));
    return false;
  };
  if (!st.shards) return drop("this job's node 0 writes every shard (checkpoint.writers node0)");
  const auto links = st.links->get();
  const int ranks = static_cast<int>(links->node_of_rank.size());
  if (w.rank < 0 || w.rank >= ranks || links->node_of_rank[w.rank] == links->node)
    return drop("not a stage of another node");
  std::optional<checkpoint::ShardEntry> entry;
  if (w.error.empty()) {
    const bool hex = w.sha256.size() == 64 && w.sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (w.file != checkpoint::shard_file_name(w.rank)) {
      w.error = fmt::format("it named the file '{}', not {}", w.file, checkpoint::shard_file_name(w.rank));
    } else if (!hex || w.tensors.empty()) {
      w.error = "it sent a malformed entry (sha256, tensor names)";
    } else {
      entry = checkpoint::ShardEntry{w.file, w.rank, w.bytes, w.sha256, std::move(w.tensors)};
    }
  }
  return st.shards->report(w.token, w.rank, std::move(entry), std::move(w.error));
}

}  // namespace

KeeperActor::behavior_type snapshot_keeper(Self* self, std::shared_ptr<SnapshotStore> store,
                                           std::shared_ptr<const CurrentLinks> links,
                                           std::shared_ptr<checkpoint::RemoteShards> shards,
                                           std::shared_ptr<CopiesInFlight> in_flight) {
  self->state.store = std::move(store);
  self->state.links = std::move(links);
  self->state.shards = std::move(shards);
  self->state.in_flight = std::move(in_flight);
  return {
      [=](SnapshotCopy& copy) { keep(self, std::move(copy)); },
      [=](ShardWritten& w) { return note_shard(self, w); },
      [=](const RestoreRejoined& r) { return restore(self, r); },
      [=](const RestoreFromCheckpoint& r) { return restore(self, r); },
  };
}

}  // namespace conveyor
