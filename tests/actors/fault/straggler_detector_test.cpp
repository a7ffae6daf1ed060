// fault.straggler_factor / fault.straggler_steps: a rank much slower than the median of
// its peers for several consecutive steps is reported once per episode.
#include <doctest/doctest.h>

#include "actors/fault/straggler_detector.hpp"
#include "actors/trace/fault_spec.hpp"

using namespace conveyor;

namespace {

StepMetrics step(std::int64_t n, std::vector<double> busy) {
  StepMetrics m;
  m.step = n;
  m.stage_busy_ms = std::move(busy);
  return m;
}

}  // namespace

TEST_CASE("a rank at or under factor x the median is never reported") {
  StragglerDetector d(2.0, 3);
  for (int s = 0; s < 10; ++s) CHECK(d.observe(step(s, {10, 10, 20, 10})).empty());  // exactly 2x
  for (int s = 10; s < 20; ++s) CHECK(d.observe(step(s, {10, 11, 19.9, 10})).empty());
}

TEST_CASE("a slow rank is reported after exactly `steps` slow steps, with its figures") {
  StragglerDetector d(2.0, 3);
  CHECK(d.observe(step(0, {10, 10, 41, 10})).empty());
  CHECK(d.observe(step(1, {10, 10, 41, 10})).empty());
  const auto r = d.observe(step(2, {10, 12, 41, 10}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 2);
  CHECK(r[0].step == 2);
  CHECK(r[0].busy_ms == 41);
  CHECK(r[0].peer_median_ms == doctest::Approx(10));  // median of its peers 10, 12, 10
  CHECK(r[0].ratio == doctest::Approx(41.0 / 10));
  CHECK(r[0].steps == 3);
}

TEST_CASE("one report per episode, and a new episode after a recovered step") {
  StragglerDetector d(2.0, 2);
  int reports = 0;
  for (int s = 0; s < 8; ++s) reports += static_cast<int>(d.observe(step(s, {10, 50, 10})).size());
  CHECK(reports == 1);
  CHECK(d.observe(step(8, {10, 15, 10})).empty());  // recovered
  CHECK(d.observe(step(9, {10, 50, 10})).empty());  // slow again: 1 of 2
  const auto r = d.observe(step(10, {10, 50, 10}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 1);
  CHECK(r[0].step == 10);
  CHECK(d.observe(step(11, {10, 50, 10})).empty());
}

TEST_CASE("an interrupted streak starts over") {
  StragglerDetector d(2.0, 3);
  CHECK(d.observe(step(0, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(1, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(2, {10, 10, 10, 12})).empty());
  CHECK(d.observe(step(3, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(4, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(5, {10, 10, 10, 30})).size() == 1);
}

TEST_CASE("steps == 1 reports on the first slow step, and two slow ranks are both reported") {
  StragglerDetector d(1.5, 1);
  const auto r = d.observe(step(0, {10, 30, 10, 10, 40}));
  REQUIRE(r.size() == 2);
  CHECK(r[0].stage == 1);
  CHECK(r[1].stage == 4);
}

TEST_CASE("with two ranks the slower one is measured against the other") {
  StragglerDetector d(2.0, 1);
  CHECK(d.observe(step(0, {10, 19})).empty());
  const auto r = d.observe(step(1, {10, 25}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 1);
  CHECK(r[0].peer_median_ms == doctest::Approx(10));
}

TEST_CASE("balanced ranks are never flagged") {
  StragglerDetector d(1.5, 1);
  for (int s = 0; s < 20; ++s)
    CHECK(d.observe(step(s, {10.0 + s % 3, 11, 10.5, 12.0 - s % 2})).empty());
}

TEST_CASE("one rank, or a median of 0, is never flagged") {
  StragglerDetector d(2.0, 1);
  for (int s = 0; s < 5; ++s) CHECK(d.observe(step(s, {100})).empty());
  CHECK(d.observe(step(5, {})).empty());
  CHECK(d.observe(step(6, {0, 0, 5})).empty());
}

TEST_CASE("bad settings are rejected") {
  CHECK_THROWS_AS(StragglerDetector(1.0, 3), std::invalid_argument);
  CHECK_THROWS_AS(StragglerDetector(2.0, 0), std::invalid_argument);
}

TEST_CASE("fault.inject slow:stage=S:ms=D[:step=N] slows that stage's train actions") {
  const FaultSpec s = parse_fault_spec("slow:stage=2:ms=40");
  CHECK(s.kind == FaultSpec::Kind::slow);
  CHECK(s.stage == 2);
  CHECK(s.delay == std::chrono::milliseconds(40));
  CHECK_FALSE(s.step);
  CHECK_THROWS_WITH_AS(parse_fault_spec("slow:stage=2"), doctest::Contains("ms=D is missing"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_fault_spec("slow:ms=5"), doctest::Contains("stage=S is missing"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_fault_spec("slow:stage=1:ms=5:kind=activation"),
                       doctest::Contains("unknown field 'kind'"), std::invalid_argument);

  ScriptedFaults faults({parse_fault_spec("slow:stage=2:ms=40"),
                         parse_fault_spec("slow:stage=1:ms=7:step=3")});
  using std::chrono::milliseconds;
  CHECK(faults.action_delay(2, 0, Phase::train) == milliseconds(40));
  CHECK(faults.action_delay(2, 5, Phase::train) == milliseconds(40));  // every step, every time
  CHECK(faults.action_delay(2, 5, Phase::eval) == milliseconds(0));    // train phase only
  CHECK(faults.action_delay(0, 0, Phase::train) == milliseconds(0));
  CHECK(faults.action_delay(1, 2, Phase::train) == milliseconds(0));
  CHECK(faults.action_delay(1, 3, Phase::train) == milliseconds(7));
}
