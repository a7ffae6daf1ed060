// Shards written by the process that holds them (checkpoint.writers every_node): staged
// by "node k", moved into place by node 0's writer. Here both sides run in this process
// on the real filesystem; tests/apps/multihost/node_written_shards_test.cpp runs them
// across processes.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include "actors/checkpoint/background_writer.hpp"
#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/remote_shards.hpp"
#include "actors/checkpoint/shard_write_queue.hpp"
#include "actors/checkpoint/staged_shards.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::posix_filesystem;
using namespace std::chrono_literals;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const checkpoint::CheckpointError& e) {
    return e.what();
  }
  return "";
}

// Stage `remote` of `snap` written as node k would, the rest as node 0: the snapshot
// node 0's writer gets.
checkpoint::Snapshot staged_snapshot(const checkpoint::Snapshot& snap, int remote, const std::string& dir,
                                     const std::shared_ptr<checkpoint::RemoteShards>& book,
                                     checkpoint::StagingTarget& target) {
  const auto step = snap.manifest.step;
  target.token = checkpoint::make_staging_token();
  target.staging = checkpoint::staging_dir(dir, step);
  checkpoint::prepare_staging(posix_filesystem(), dir, step, target.token);
  checkpoint::Snapshot out = snap;
  out.shards.at(remote) = checkpoint::awaited_shard(book, target, remote, 5s);
  return out;
}

TEST_CASE("a shard its own node wrote ends up byte for byte where node 0 would have written it") {
  ScratchDir direct("staged_direct"), staged("staged_nodes");
  const auto snap = small_snapshot(6, 3);
  checkpoint::write_checkpoint(posix_filesystem(), direct.path(), snap, 2);

  auto book = std::make_shared<checkpoint::RemoteShards>();
  checkpoint::StagingTarget target;
  const auto to_write = staged_snapshot(snap, 2, staged.path(), book, target);
  CHECK(target.token.size() == 16);
  // "Node k" writes on a thread of its own and reports a little later.
  std::thread node_k([&] {
    std::this_thread::sleep_for(50ms);
    const auto entry = checkpoint::write_staged_shard(posix_filesystem(), target.staging, target.token, 2,
                                                      snap.shards[2].tensors);
    CHECK(book->report(target.token, 2, entry, ""));
  });
  const auto result = checkpoint::write_checkpoint(posix_filesystem(), staged.path(), to_write, 2);
  node_k.join();

  for (const char* name : {"stage-0.safetensors", "stage-1.safetensors", "stage-2.safetensors", "manifest.json"})
    CHECK_MESSAGE(file_bytes(direct / ("step-000006/" + std::string(name))) ==
                      file_bytes(staged / ("step-000006/" + std::string(name))),
                  name);
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), result.path).shards.size() == 3);
  CHECK_FALSE(fs::exists(staged / ".incoming"));  // placed, then the staging folders removed
  CHECK(book->pending() == 0);
}

TEST_CASE("a checkpoint whose shard's node is lost fails as lost with that node, and the next one is written") {
  ScratchDir dir("staged_lost_node");
  auto book = std::make_shared<checkpoint::RemoteShards>();
  checkpoint::BackgroundWriter writer(posix_filesystem(), {dir.path(), 3, 1});
  checkpoint::StagingTarget target;
  writer.submit(staged_snapshot(small_snapshot(4, 3), 2, dir.path(), book, target));
  // Node 1 (stage 2) is lost before or while node 0's writer waits for its shard.
  book->fail_node(1, {0, 0, 1}, "its connection closed");
  writer.wait_idle();
  auto failed = writer.take_errors();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].step == 4);
  CHECK(failed[0].lost_node == 1);
  CHECK(failed[0].message.find("node 1 was lost: its connection closed") != std::string::npos);
  CHECK(checkpoint::list_checkpoints(posix_filesystem(), dir.path()).empty());  // step 4's folder removed
  CHECK_THROWS_AS(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000004"),
                  checkpoint::CheckpointError);

  // A disk's failure is no node's: lost_node stays empty. Then the next write goes through
  // and clears the lost one's leftovers.
  writer.submit(staged_snapshot(small_snapshot(6, 3), 2, dir.path(), book, target));
  book->fail_pending("the job ended");
  writer.wait_idle();
  failed = writer.take_errors();
  REQUIRE(failed.size() == 1);
  CHECK_FALSE(failed[0].lost_node);
  writer.submit(small_snapshot(8, 3));
  writer.flush();
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000008").shards.size() == 3);
  CHECK_FALSE(fs::exists(dir / ".incoming"));
  CHECK(checkpoint::list_checkpoints(posix_filesystem(), dir.path()).size() == 1);  // incomplete ones pruned
}

TEST_CASE("a node that does not see node 0's staging folder is told that checkpoint.dir must be shared") {
  ScratchDir node0("staged_node0"), elsewhere("staged_elsewhere");
  const std::string token = checkpoint::make_staging_token();
  checkpoint::prepare_staging(posix_filesystem(), node0.path(), 4, token);
  const auto tensors = small_snapshot(4, 1).shards[0].tensors;

  // Another host's folder of that name: never prepared there.
  const auto missing = error_of([&] {
    checkpoint::write_staged_shard(posix_filesystem(), checkpoint::staging_dir(elsewhere.path(), 4), token, 1,
                                   tensors);
  });
  CHECK(missing.find("does not see it") != std::string::npos);
  CHECK(missing.find("checkpoint.dir") != std::string::npos);

  // Node 0's folder, but an attempt it never prepared there.
  const auto unknown = error_of([&] {
    checkpoint::write_staged_shard(posix_filesystem(), checkpoint::staging_dir(node0.path(), 4),
                                   checkpoint::make_staging_token(), 1, tensors);
  });
  CHECK(unknown.find("does not see it") != std::string::npos);
}

TEST_CASE("two attempts at one step's checkpoint stage their shards side by side, each places its own") {
  ScratchDir dir("staged_attempts");
  const auto staging = checkpoint::staging_dir(dir.path(), 4);
  const std::string first = checkpoint::make_staging_token(), second = checkpoint::make_staging_token();
  checkpoint::prepare_staging(posix_filesystem(), dir.path(), 4, first);
  checkpoint::prepare_staging(posix_filesystem(), dir.path(), 4, second);
  const auto old_state = small_snapshot(4, 2).shards[1].tensors;
  const auto new_state = small_snapshot(5, 2).shards[1].tensors;
  // The earlier attempt's write lands last: it cannot replace the later one's shard.
  const auto fresh = checkpoint::write_staged_shard(posix_filesystem(), staging, second, 1, new_state);
  const auto stale = checkpoint::write_staged_shard(posix_filesystem(), staging, first, 1, old_state);
  CHECK(fresh.sha256 != stale.sha256);
  fs::create_directories(dir / "step-000004");
  checkpoint::place_staged_shard(posix_filesystem(), staging, second, dir / "step-000004", fresh);
  const auto placed = read_safetensors(dir / "step-000004/stage-1.safetensors");
  REQUIRE(placed.size() == new_state.size());
  CHECK(std::memcmp(placed[0].tensor.raw(), new_state[0].tensor.raw(), new_state[0].tensor.bytes()) == 0);
  // Placed once: a second placing of that attempt finds nothing and says so.
  CHECK(error_of([&] {
          checkpoint::place_staged_shard(posix_filesystem(), staging, second, dir / "step-000004", fresh);
        }).find("missing") != std::string::npos);
}

TEST_CASE("a shard its node could not write fails that checkpoint only, the earlier one stays") {
  ScratchDir dir("staged_fail");
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(2, 2), 3);
  auto book = std::make_shared<checkpoint::RemoteShards>();
  checkpoint::StagingTarget target;
  const auto to_write = staged_snapshot(small_snapshot(4, 2), 1, dir.path(), book, target);
  CHECK(book->report(target.token, 1, std::nullopt, "disk full on node 1"));
  const auto why = error_of([&] { checkpoint::write_checkpoint(posix_filesystem(), dir.path(), to_write, 3); });
  CHECK(why.find("stage 1's node could not write its shard: disk full on node 1") != std::string::npos);
  CHECK(why.find("earlier checkpoints are untouched") != std::string::npos);
  // A failed write leaves no step folder (the earlier checkpoint is the newest).
  const auto all = checkpoint::list_checkpoints(posix_filesystem(), dir.path());
  REQUIRE(all.size() == 1);
  CHECK(all[0].step == 2);
  CHECK(all[0].complete);
  CHECK_FALSE(fs::exists(dir / "step-000004"));
  checkpoint::verify_checkpoint(posix_filesystem(), all[0].path);

  // The next checkpoint removes the failed attempt's staging folder.
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(6, 2), 3);
  CHECK(fs::exists(dir / "step-000006"));
  CHECK_FALSE(fs::exists(target.staging));
}

TEST_CASE("node 0's book of remote shards: attempts by token, bounded waits, lost nodes") {
  checkpoint::RemoteShards book;
  checkpoint::ShardEntry entry{"stage-3.safetensors", 3, 10, std::string(64, 'a'), {"w"}};

  // Reports nobody expects are refused: an unknown attempt, an unknown stage, twice.
  CHECK_FALSE(book.report("t1", 3, entry, ""));
  book.expect("t1", 3);
  CHECK_FALSE(book.report("t0", 3, entry, ""));
  CHECK(book.pending() == 1);
  CHECK(book.report("t1", 3, entry, ""));
  CHECK_FALSE(book.report("t1", 3, entry, ""));
  CHECK(book.wait("t1", 3, 1s, "/x") == entry);

  // An entry for another stage than the one reported is a failure, not a shard.
  book.expect("t2", 3);
  auto wrong = entry;
  wrong.stage = 4;
  CHECK(book.report("t2", 3, wrong, ""));
  CHECK(error_of([&] { book.wait("t2", 3, 1s, "/x"); }).find("stage 4's, not stage 3's") != std::string::npos);

  // No report within the bound.
  book.expect("t3", 3);
  const auto late = error_of([&] { book.wait("t3", 3, 20ms, "/x"); });
  CHECK(late.find("checkpoint.remote_timeout_s") != std::string::npos);
  CHECK_FALSE(book.report("t3", 3, entry, ""));  // the wait gave up on it

  // A lost node fails its stages' pending shards at once, not at the bound.
  book.expect("t4", 3);
  book.expect("t4", 5);
  CHECK_FALSE(book.wait_all(10ms));
  book.fail_node(1, {0, 0, 0, 1, 1, 2}, "its connection closed");  // stages 3 and 4 run there
  const auto start = std::chrono::steady_clock::now();
  std::optional<int> lost_node;
  try {
    book.wait("t4", 3, 60s, "/x");
    FAIL("the shard of a lost node was taken");
  } catch (const checkpoint::CheckpointError& e) {
    CHECK(std::string(e.what()).find("node 1 was lost: its connection closed") != std::string::npos);
    lost_node = e.lost_node();
  }
  CHECK(lost_node == 1);  // the checkpoint went down with node 1, the run may recover
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(book.pending() == 1);  // stage 5 runs on node 2
  book.fail_pending("the job ended");
  CHECK(book.wait_all(10ms));
  try {
    book.wait("t4", 5, 60s, "/x");
    FAIL("a shard failed at the job's end was taken");
  } catch (const checkpoint::CheckpointError& e) {
    CHECK(std::string(e.what()).find("the job ended") != std::string::npos);
    CHECK_FALSE(e.lost_node());  // no node was lost: a failure of the checkpoint
  }
  CHECK(error_of([&] { book.wait("t9", 5, 1s, "/x"); }).find("no shard of stage 5") != std::string::npos);
}

TEST_CASE("a staging folder that node 0 could not prepare fails that checkpoint with the reason") {
  ScratchDir dir("staged_unprepared");
  auto book = std::make_shared<checkpoint::RemoteShards>();
  checkpoint::StagingTarget target{dir / ".incoming/step-000002", "", "preparing: read-only filesystem"};
  auto snap = small_snapshot(2, 2);
  snap.shards[1] = checkpoint::awaited_shard(book, target, 1, 5s);
  CHECK(book->pending() == 0);  // nothing is expected of the other node
  CHECK(error_of([&] { checkpoint::write_checkpoint(posix_filesystem(), dir.path(), snap, 2); })
            .find("read-only filesystem") != std::string::npos);
}

TEST_CASE("staging folders of earlier steps are leftovers, later ones are kept") {
  ScratchDir dir("staged_leftovers");
  for (std::int64_t step : {2, 4, 6}) checkpoint::prepare_staging(posix_filesystem(), dir.path(), step, "t");
  CHECK(checkpoint::remove_staging_before(posix_filesystem(), dir.path(), 4, /*inclusive=*/false).empty());
  CHECK_FALSE(fs::exists(checkpoint::staging_dir(dir.path(), 2)));
  CHECK(fs::exists(checkpoint::staging_dir(dir.path(), 4)));
  CHECK(fs::exists(checkpoint::staging_dir(dir.path(), 6)));
  // They are no step folders: readers and pruning never see them.
  CHECK(checkpoint::list_checkpoints(posix_filesystem(), dir.path()).empty());
}

TEST_CASE("a node's shard write queue runs tasks in order and takes none once closed") {
  std::vector<int> ran;
  std::mutex m;
  checkpoint::ShardWriteQueue queue;
  for (int i = 0; i < 5; ++i)
    CHECK(queue.submit([&, i] {
      std::this_thread::sleep_for(2ms);
      std::lock_guard lock(m);
      ran.push_back(i);
    }));
  CHECK(queue.submit([] { throw std::runtime_error("a task that throws is logged, not fatal"); }));
  CHECK(queue.drain(10s));
  CHECK(ran == std::vector<int>{0, 1, 2, 3, 4});
  queue.close();
  CHECK_FALSE(queue.submit([&] { ran.push_back(99); }));
  CHECK(queue.drain(1s));
  CHECK(ran.size() == 5);
}

}  // namespace
}  // namespace conveyor::testing
