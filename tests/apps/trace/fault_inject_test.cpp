// fault.inject end to end: a message dropped on purpose hangs the pipeline, the watchdog
// names who waits for what, and fault.policy=abort stops the run with exit code 3.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a dropped message with fault.policy=abort ends the run with exit 3 and a diagnosis") {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  // Stage 1's first message of step 2 under 1F1B on 4 stages: the activation of
  // micro-batch 0 for stage 2.
  const auto r = run_conveyor({"train", "--set", "train.steps=4", "--set",
                               "fault.inject=[drop:stage=1:step=2]", "--set", "fault.policy=abort",
                               "--set", "watchdog.timeout_s=2", "--out", dir / "run"},
                              60);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(seconds < 20.0);
  CHECK(r.err.find("stage 2 waits for F step 2 micro-batch 0 from stage 1") != std::string::npos);
}

TEST_CASE("a delayed stage still trains to the end with the same weights") {
  TempDir dir;
  const auto plain = run_conveyor({"train", "--set", "train.steps=3", "--out", dir / "plain"}, 60);
  const auto slow = run_conveyor({"train", "--set", "train.steps=3", "--set",
                                  "fault.inject=[delay:stage=2:ms=5]", "--out", dir / "slow"},
                                 60);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(slow.exit_code == 0);
  CHECK(read_text(dir / "plain/weights.safetensors") == read_text(dir / "slow/weights.safetensors"));
}

TEST_CASE("a malformed fault.inject entry exits 2 naming it") {
  const auto r = run_conveyor({"train", "--set", "fault.inject=[drop:stage=1]"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("fault.inject") != std::string::npos);
  CHECK(r.err.find("step=N is missing") != std::string::npos);
  const auto kind = run_conveyor({"train", "--set", "fault.inject=[explode:stage=1]"});
  CHECK(kind.exit_code == 2);
  CHECK(kind.err.find("'explode' is not a fault kind") != std::string::npos);
  // A process exit in a checkpoint write that never happens (node 0 writes through its own
  // writer; node 1 only with checkpoint.writers every_node, at a checkpoint's step).
  for (const auto& [extra, what] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"fault.inject=[exit:node=1:step=4:when=checkpoint]", "checkpoint.every=2"}, "writers node0"},
           {{"fault.inject=[exit:node=1:step=3:when=checkpoint]", "checkpoint.every=2", "checkpoint.writers=every_node"},
            "every 2"},
           {{"fault.inject=[exit:node=0:step=4:when=checkpoint]", "checkpoint.every=2", "checkpoint.writers=every_node"},
            "node 0 writes no shard"}}) {
    std::vector<std::string> args{"train", "--nnodes", "2", "--node-rank", "0", "--rdzv", "127.0.0.1:9"};
    for (const auto& e : extra) args.insert(args.end(), {"--set", e});
    const auto r = run_conveyor(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(what) != std::string::npos);
  }
  const auto policy = run_conveyor({"train", "--set", "fault.policy=ignore"});
  CHECK(policy.exit_code == 2);
  CHECK(policy.err.find("fault.policy") != std::string::npos);
}
