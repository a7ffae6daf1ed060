// Progress of another node's stages, as node 0's watchdog sees it: states copied from
// the report and dated by their age on node 0's clock, whatever the reporting host's
// clock reads; a report that names another node's rank or a state that does not exist
// is refused whole.
#include <doctest/doctest.h>

#include "actors/trace/remote_progress.hpp"

using namespace conveyor::trace;

TEST_CASE("a reported state keeps its age on the receiving host's clock") {
  ProgressBoard there(4);
  // Node 1 runs ranks 2 and 3; its clock reads about 1e12 ns, node 0's about 5e9.
  there.stage(2).publish(StageState::running, 3, 7, false, 5, 1'000'000'000'000, 16);
  there.stage(3).publish(StageState::waiting, 3, 7, true, 2, 999'000'000'000);
  const auto report = progress_report(there, {2, 3}, 1'000'250'000'000);
  REQUIRE(report.size() == 2);
  CHECK(report[0].age_ns == 250'000'000);
  CHECK(report[1].age_ns == 1'250'000'000);

  ProgressBoard here(4);
  REQUIRE_FALSE(apply_progress_report(here, 1, {2, 3}, report, 5'000'000'000));
  const auto s = here.snapshot();
  CHECK(s[2].state == StageState::running);
  CHECK(s[2].round == 3);
  CHECK(s[2].step == 7);
  CHECK(s[2].slot == 5);
  CHECK(s[2].first_micro_batch == 16);
  CHECK(s[2].since_ns == 4'750'000'000);
  CHECK(s[3].state == StageState::waiting);
  CHECK(s[3].eval);
  CHECK(s[3].since_ns == 3'750'000'000);
  // Node 0's own ranks are untouched.
  CHECK(s[0].since_ns == 0);
}

TEST_CASE("a stage not begun on its node stays unpublished on node 0") {
  ProgressBoard there(2), here(2);
  const auto report = progress_report(there, {1}, 123'456'789);
  REQUIRE(report.size() == 1);
  CHECK(report[0].age_ns == -1);
  REQUIRE_FALSE(apply_progress_report(here, 1, {1}, report, 9'000'000'000));
  CHECK(here.snapshot()[1].since_ns == 0);
}

TEST_CASE("a report naming another node's stage or an unknown state is refused whole") {
  ProgressBoard there(4), here(4);
  there.stage(2).publish(StageState::running, 1, 1, false, 0, 100);
  there.stage(1).publish(StageState::running, 1, 1, false, 0, 100);
  auto report = progress_report(there, {2, 1}, 200);
  const auto foreign = apply_progress_report(here, 1, {2, 3}, report, 1000);
  REQUIRE(foreign);
  CHECK(*foreign == "node 1 reported the progress of stage 1, which it does not run");
  CHECK(here.snapshot()[2].since_ns == 0);  // nothing written, not even the valid rank

  report = progress_report(there, {2}, 200);
  report[0].state = 9;
  const auto unknown = apply_progress_report(here, 1, {2, 3}, report, 1000);
  REQUIRE(unknown);
  CHECK(*unknown == "node 1 reported stage 2 in state 9, which does not exist");

  report = progress_report(there, {2}, 200);
  report[0].age_ns = -5;
  CHECK(apply_progress_report(here, 1, {2, 3}, report, 1000));
  CHECK(here.snapshot()[2].since_ns == 0);
}
