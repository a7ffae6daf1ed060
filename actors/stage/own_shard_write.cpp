#include "actors/stage/own_shard_write.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "actors/checkpoint/checkpoint_log.hpp"
#include "actors/checkpoint/staged_shards.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/fault/fault_spec.hpp"

namespace conveyor {

void NodeShardWrites::attach(caf::actor reporter) {
  std::lock_guard lock(mutex_);
  reporter_ = std::move(reporter);
}

void NodeShardWrites::detach() {
  std::lock_guard lock(mutex_);
  reporter_ = nullptr;
}

void NodeShardWrites::report(const KeeperActor& keeper, ShardWritten report) {
  std::lock_guard lock(mutex_);
  if (!reporter_) {
    checkpoint::checkpoint_log().warn("stage {}'s shard report is dropped: this node is shutting down", report.rank);
    return;
  }
  caf::anon_send(reporter_, keeper, std::move(report));
}

void write_own_shard(StageSelf* self, const WriteShard& ask) {
  auto& st = self->state;
  const int rank = st.worker->rank();
  const auto writes = st.job->services.shard_writes;
  if (!st.links || st.links->node == st.peers.keeper_node || !st.peers.keeper || !writes)
    throw std::logic_error(fmt::format("stage {}: asked to write its own shard, but it runs on the keeper's "
                                       "node {}, knows no keeper or has no write queue",
                                       rank, st.peers.keeper_node));
  auto snap = st.job->services.snapshots ? st.job->services.snapshots->get(rank, ask.steps_done) : nullptr;
  if (snap && snap->marker) snap = nullptr;
  const bool accepted = writes->queue().submit([writes, keeper = st.peers.keeper, snap, rank, ask,
                                                node = st.links->node, fault = st.job->services.fault] {
    if (fault && fault->exit_in_shard_write(ask.steps_done))
      die_by_injected_exit(
          fmt::format("stage {}: fault.inject exit: this process dies writing its shard of step {}", rank, ask.steps_done));
    ShardWritten report{rank, ask.token, {}, {}, 0, {}, {}};
    try {
      if (!snap)
        throw std::runtime_error(fmt::format("stage {} holds no snapshot after step {}", rank, ask.steps_done));
      const auto start = std::chrono::steady_clock::now();
      const auto entry = checkpoint::write_staged_shard(checkpoint::posix_filesystem(), ask.staging, ask.token,
                                                        rank, snap->tensors());
      checkpoint::checkpoint_log().info(
          "node {} wrote stage {}'s shard of step {} ({:.1f} MB in {:.2f} s)", node, rank, ask.steps_done,
          static_cast<double>(entry.bytes) / 1e6,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      report.file = entry.file;
      report.bytes = entry.bytes;
      report.sha256 = entry.sha256;
      report.tensors = entry.tensors;
    } catch (const std::exception& e) {
      report.error = e.what();
      checkpoint::checkpoint_log().error("node {} could not write stage {}'s shard of step {}: {}", node, rank,
                                         ask.steps_done, report.error);
    }
    writes->report(keeper, std::move(report));
  });
  if (!accepted)
    checkpoint::checkpoint_log().warn("stage {}'s shard of step {} is not written: this node is shutting down",
                                      rank, ask.steps_done);
}

caf::behavior shard_reporter(caf::event_based_actor* self, std::chrono::milliseconds timeout) {
  struct State {
    int outstanding = 0;
    std::vector<caf::response_promise> flushes;
    void settle() {
      if (--outstanding > 0) return;
      for (auto& p : flushes) p.deliver(true);
      flushes.clear();
    }
  };
  auto st = std::make_shared<State>();
  return {
      [=](const KeeperActor& keeper, ShardWritten& w) {
        ++st->outstanding;
        const int rank = w.rank;
        self->request(keeper, timeout, std::move(w))
            .then(
                [=](bool noted) {
                  if (!noted)
                    checkpoint::checkpoint_log().warn("node 0 expected stage {}'s shard no more (that "
                                                      "checkpoint attempt ended)",
                                                      rank);
                  st->settle();
                },
                [=](caf::error& e) {
                  checkpoint::checkpoint_log().error("node 0 did not acknowledge stage {}'s shard report: {}", rank,
                                                     error_text(self->home_system(), e));
                  st->settle();
                });
      },
      [=](flush_shard_reports_atom) -> caf::result<bool> {
        if (st->outstanding == 0) return true;
        st->flushes.push_back(self->make_response_promise());
        return st->flushes.back();
      },
  };
}

}  // namespace conveyor
