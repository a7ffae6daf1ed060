// Issue 44 with tied embeddings (model.tie_embeddings: the embedding's holder, the first
// stage, and the LM head's, the last, sum the tied tensor's gradient in a group of two).
// A re-layout moves the last stage onto another actor, so the new layout's holders join a
// group of their own once restored (coordinator_relayout.cpp). 3 processes of one CPU
// stage each: node 2 is killed at a random step (seed printed; CONVEYOR_TEST_SEED replays)
// and started again once the job shrank: the group runs between nodes 0 and 1 on 2
// stages, then between nodes 0 and 2 on 3, and the run ends with the fault-free weights
// bit for bit.
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;

std::vector<std::string> tied_job(const std::vector<std::string>& extra) {
  auto args = three_stage_job(kSteps, {"--set", "model.tie_embeddings=true"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("tied embeddings across a shrink and a grow: the new layout's two holders sum in a group of their own, and the run ends with the fault-free weights bit for bit") {
  const KillStep kill = random_kill_step(3, 12);

  TempDir dir;
  const std::string& want = one_process_weights(dir, tied_job({}));
  auto nodes = job_on_nodes(3, tied_job({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"}),
                            dir / "run", "tied-relayout-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  CHECK(results[2].killed_exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("replan: node 2 lost for good") != std::string::npos);
  CHECK(results[0].err.find("joined: node 2 taken in: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 3 "
                            "stages on nodes 0, 1, 2") != std::string::npos);

  CHECK(event_rows(dir.path() / "run", "replan").size() == 1);
  CHECK(event_rows(dir.path() / "run", "joined").size() == 1);
  check_final_weights(want, dir.path() / "run", kill.seed);
}
