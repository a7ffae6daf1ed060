#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "actors/checkpoint/background_writer.hpp"
#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::BackgroundWriter;
using checkpoint::CheckpointError;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void wait_idle(const BackgroundWriter& writer) {
  const auto t0 = Clock::now();
  while (!writer.idle()) {
    REQUIRE(ms_since(t0) < 5000.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_CASE("submitting a checkpoint does not wait for a slow disk, flush does") {
  ScratchDir dir("background_slow");
  FaultFilesystem slow;
  slow.write_delay = std::chrono::milliseconds(20);  // 11 writes (2 shards, 1 manifest): >= 220 ms
  BackgroundWriter writer(slow, {dir.path(), 2, 1});

  auto t0 = Clock::now();
  writer.submit(small_snapshot(10));
  const double submit_ms = ms_since(t0);
  CHECK(submit_ms < 20.0);  // less than one slow write; the whole checkpoint takes >= 220 ms
  CHECK_FALSE(fs::exists(dir / "step-000010/manifest.json"));

  t0 = Clock::now();
  writer.flush();
  CHECK(ms_since(t0) >= 100.0);
  CHECK(checkpoint::verify_checkpoint(checkpoint::posix_filesystem(), dir / "step-000010").step == 10);
  REQUIRE(writer.last_written());
  CHECK(writer.last_written()->step == 10);
  MESSAGE("submit returned in " << submit_ms << " ms while the slow disk took over 220 ms");
}

TEST_CASE("a shard given as a producer is produced on the writer's thread and written like any other") {
  ScratchDir dir("background_produce");
  BackgroundWriter writer(checkpoint::posix_filesystem(), {dir.path(), 2, 1});
  auto snapshot = small_snapshot(7);
  auto made = snapshot.shards[1].tensors;
  snapshot.shards[1].tensors.clear();
  const auto caller = std::this_thread::get_id();
  auto produced_on = std::make_shared<std::thread::id>();
  snapshot.shards[1].produce = [made, produced_on] {
    *produced_on = std::this_thread::get_id();
    return made;
  };
  writer.submit(std::move(snapshot));
  writer.flush();
  CHECK(*produced_on != std::thread::id{});
  CHECK(*produced_on != caller);
  const auto loaded = checkpoint::load_checkpoint(checkpoint::posix_filesystem(), dir / "step-000007");
  REQUIRE(loaded.manifest.shards.size() == 2);
  CHECK(loaded.manifest.shards[1].tensors.size() == made.size());

  // write_checkpoint itself refuses a shard nobody produced (it would write an empty shard).
  auto unproduced = small_snapshot(8);
  unproduced.shards[0].produce = [] { return std::vector<NamedTensor>{}; };
  CHECK_THROWS_AS(checkpoint::write_checkpoint(checkpoint::posix_filesystem(), dir.path(), unproduced, 2),
                  std::invalid_argument);
}

TEST_CASE("a full checkpoint queue makes submit wait instead of growing without bound") {
  ScratchDir dir("background_full");
  FaultFilesystem slow;
  slow.write_delay = std::chrono::milliseconds(5);
  BackgroundWriter writer(slow, {dir.path(), 3, 1});
  writer.submit(small_snapshot(1));  // taken by the thread at once
  writer.submit(small_snapshot(2));  // queued
  const auto t0 = Clock::now();
  writer.submit(small_snapshot(3));  // must wait for step 1 to finish
  CHECK(ms_since(t0) >= 5.0);  // at least one slow write of step 1
  writer.flush();
  std::vector<std::int64_t> steps;
  for (const auto& c : checkpoint::list_checkpoints(checkpoint::posix_filesystem(), dir.path())) steps.push_back(c.step);
  CHECK(steps == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("a failed background checkpoint write surfaces on the next flush with the path and reason") {
  ScratchDir dir("background_error");
  FaultFilesystem faulty;
  BackgroundWriter writer(faulty, {dir.path(), 2, 1});
  writer.submit(small_snapshot(10));
  writer.flush();

  faulty.fail_write_to = "step-000020/.stage-0";
  writer.submit(small_snapshot(20));  // returns: the failure is not known yet
  const std::string expected = "step 20: " + dir.path() + "/step-000020/.stage-0.safetensors.tmp-";
  CHECK_THROWS_WITH_AS(writer.flush(), doctest::Contains(expected.c_str()), CheckpointError);
  writer.flush();  // reported once, not again
  CHECK(writer.last_written()->step == 10);

  // A failure also surfaces on the next submit, which then does not queue its snapshot.
  writer.submit(small_snapshot(30));
  wait_idle(writer);
  faulty.fail_write_to = "step-000040/.stage-1";
  writer.submit(small_snapshot(40));
  wait_idle(writer);
  faulty.fail_write_to.clear();
  CHECK_THROWS_WITH_AS(writer.submit(small_snapshot(50)), doctest::Contains("injected ENOSPC"), CheckpointError);
  writer.flush();
  CHECK_FALSE(fs::exists(dir / "step-000050"));
  writer.submit(small_snapshot(50));
  writer.flush();
  CHECK(writer.last_written()->step == 50);
  CHECK(checkpoint::verify_checkpoint(checkpoint::posix_filesystem(), dir / "step-000030").step == 30);
}

TEST_CASE("every checkpoint written is taken once, in order, also those written while the next was queued") {
  ScratchDir dir("background_taken");
  FaultFilesystem faulty;
  BackgroundWriter writer(faulty, {dir.path(), 5, 1});
  for (const std::int64_t step : {10, 20, 30}) writer.submit(small_snapshot(step));  // no poll between
  writer.flush();
  std::vector<std::int64_t> steps;
  for (const auto& w : writer.take_written()) steps.push_back(w.step);
  CHECK(steps == std::vector<std::int64_t>{10, 20, 30});
  CHECK(writer.take_written().empty());  // taken
  // a failed write is not among them
  faulty.fail_write_to = "step-000040/.stage-0";
  writer.submit(small_snapshot(40));
  CHECK_THROWS_AS(writer.flush(), CheckpointError);
  faulty.fail_write_to.clear();
  writer.submit(small_snapshot(50));
  writer.flush();
  const auto later = writer.take_written();
  REQUIRE(later.size() == 1);
  CHECK(later[0].step == 50);
}

}  // namespace
}  // namespace conveyor::testing
