// Why a stage ended, in words naming its node and that node's stages (stage_end_text.hpp),
// and the exit reason of a failed job, told apart from a normal end across processes
// (job_failure.hpp).
#include <doctest/doctest.h>

#include <caf/all.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "actors/coordinator/job_failure.hpp"
#include "actors/coordinator/stage_end_text.hpp"
#include "actors/messages/error_text.hpp"

using namespace conveyor;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a node and its stages are named as ranges where they are contiguous") {
  const std::vector<int> node_of_rank{0, 0, 1, 1, 2, 1};
  CHECK(node_and_stages(0, node_of_rank) == "node 0 (stages 0-1)");
  CHECK(node_and_stages(2, node_of_rank) == "node 2 (stage 4)");
  CHECK(node_and_stages(1, node_of_rank) == "node 1 (stages 2, 3, 5)");
  CHECK(node_and_stages(3, node_of_rank) == "node 3");
}

TEST_CASE("CAF's codes for a stage's end become words, a stage's own message passes through") {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  const std::vector<int> node_of_rank{0, 0, 1, 1};
  // Seen from node 0: a stage of node 1 whose process ended it.
  const auto remote_shutdown = stage_end_text(system, caf::exit_reason::user_shutdown, 2, node_of_rank, 0);
  CHECK(has(remote_shutdown, "node 1 (stages 2-3) stopped answering"));
  CHECK_FALSE(has(remote_shutdown, "user_shutdown"));
  // Seen from node 1: its own stage, killed by node 0 to replace it.
  const auto killed = stage_end_text(system, caf::exit_reason::kill, 2, node_of_rank, 1);
  CHECK(has(killed, "node 0 ended it to replace it"));
  CHECK(has(killed, "node 1 (stages 2-3) was not asked for a replacement"));
  CHECK(has(stage_end_text(system, caf::exit_reason::remote_link_unreachable, 3, node_of_rank, 0),
            "node 1 (stages 2-3) stopped answering: its connection broke"));
  CHECK(has(stage_end_text(system, caf::sec::request_receiver_down, 3, node_of_rank, 0),
            "stage 3 is no longer running there"));
  CHECK(has(stage_end_text(system, caf::sec::request_timeout, 1, node_of_rank, 0), "did not reply in time"));
  CHECK(stage_end_text(system, failure("stage 1: a NaN in the loss"), 1, node_of_rank, 0) ==
        "stage 1: a NaN in the loss");
  // One process: no node to name.
  CHECK(stage_end_text(system, caf::exit_reason::user_shutdown, 1, {}, 0) ==
        "it was shut down while the job still needed it");
}

TEST_CASE("a node told its stages were taken away hears the job's peer silence, not a fixed 5 s") {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  const std::vector<int> node_of_rank{0, 0, 1, 1};
  using std::chrono::milliseconds;
  CHECK(has(stage_end_text(system, caf::exit_reason::kill, 2, node_of_rank, 1, milliseconds(2000)),
            "stopped answering (for 2 s: frozen, stopped or cut off)"));
  const auto short_silence = stage_end_text(system, caf::exit_reason::kill, 2, node_of_rank, 1, milliseconds(1500));
  CHECK(has(short_silence, "stopped answering (for 1500 ms: frozen, stopped or cut off)"));
  CHECK_FALSE(has(short_silence, "5 s"));
}

TEST_CASE("a failed job's exit reason carries its cause and is no other reason") {
  const auto reason = job_failed("stage 0 failed: injected crash");
  REQUIRE(job_failure_reason(reason).has_value());
  CHECK(*job_failure_reason(reason) == "stage 0 failed: injected crash");
  CHECK_FALSE(job_failure_reason(caf::error{}).has_value());
  CHECK_FALSE(job_failure_reason(caf::exit_reason::user_shutdown).has_value());
  CHECK_FALSE(job_failure_reason(failure("stage 0 failed: injected crash")).has_value());
  CHECK_FALSE(job_failure_reason(caf::make_error(caf::sec::runtime_error)).has_value());
}
