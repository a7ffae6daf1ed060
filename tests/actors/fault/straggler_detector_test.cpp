// fault.straggler_factor / fault.straggler_steps: a rank that becomes much slower than it
// was, against the median of its peers, for several consecutive steps is reported once
// per episode; a rank heavier by design is not.
#include <doctest/doctest.h>

#include "actors/fault/straggler_detector.hpp"
#include "actors/fault/fault_spec.hpp"

using namespace conveyor;

namespace {

StepMetrics step(std::int64_t n, std::vector<double> busy) {
  StepMetrics m;
  m.step = n;
  m.stage_busy_ms = std::move(busy);
  return m;
}

// Steps 0 .. kBaselineSteps-1 with `busy`: every rank's baseline ratio; returns the next step.
std::int64_t baseline(StragglerDetector& d, const std::vector<double>& busy) {
  std::int64_t s = 0;
  for (; s < StragglerDetector::kBaselineSteps; ++s) CHECK(d.observe(step(s, busy)).empty());
  return s;
}

}  // namespace

TEST_CASE("a rank at or under factor x its baseline ratio is never reported") {
  StragglerDetector d(2.0, 3);
  auto s = baseline(d, {10, 10, 10, 10});
  for (; s < 10; ++s) CHECK(d.observe(step(s, {10, 10, 20, 10})).empty());  // exactly 2x
  for (; s < 20; ++s) CHECK(d.observe(step(s, {10, 11, 19.9, 10})).empty());
}

TEST_CASE("a stage heavier by design (the head) is not a straggler, its slowing down is") {
  StragglerDetector d(2.0, 3);
  auto s = baseline(d, {10, 10, 10, 25});  // the last stage carries the LM head: 2.5x
  for (; s < 10; ++s) CHECK(d.observe(step(s, {10, 10, 10, 26})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 60})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 60})).empty());
  const auto r = d.observe(step(s, {10, 10, 10, 60}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 3);
  CHECK(r[0].baseline_ratio == doctest::Approx(2.5));
  CHECK(r[0].ratio == doctest::Approx(6.0));
}

TEST_CASE("a slow rank is reported after exactly `steps` slow steps, with its figures") {
  StragglerDetector d(2.0, 3);
  auto s = baseline(d, {10, 10, 10, 10});
  CHECK(d.observe(step(s++, {10, 10, 41, 10})).empty());
  CHECK(d.observe(step(s++, {10, 10, 41, 10})).empty());
  const auto r = d.observe(step(s, {10, 12, 41, 10}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 2);
  CHECK(r[0].step == s);
  CHECK(r[0].busy_ms == 41);
  CHECK(r[0].peer_median_ms == doctest::Approx(10));  // median of its peers 10, 12, 10
  CHECK(r[0].ratio == doctest::Approx(41.0 / 10));
  CHECK(r[0].baseline_ratio == doctest::Approx(1.0));
  CHECK(r[0].steps == 3);
}

TEST_CASE("one report per episode, and a new episode after a recovered step") {
  StragglerDetector d(2.0, 2);
  auto s = baseline(d, {10, 10, 10});
  int reports = 0;
  for (int k = 0; k < 8; ++k) reports += static_cast<int>(d.observe(step(s++, {10, 50, 10})).size());
  CHECK(reports == 1);
  CHECK(d.observe(step(s++, {10, 15, 10})).empty());  // recovered
  CHECK(d.observe(step(s++, {10, 50, 10})).empty());  // slow again: 1 of 2
  const auto r = d.observe(step(s, {10, 50, 10}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 1);
  CHECK(r[0].step == s);
  CHECK(d.observe(step(s + 1, {10, 50, 10})).empty());
}

TEST_CASE("an interrupted streak starts over") {
  StragglerDetector d(2.0, 3);
  auto s = baseline(d, {10, 10, 10, 10});
  CHECK(d.observe(step(s++, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 12})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 30})).empty());
  CHECK(d.observe(step(s++, {10, 10, 10, 30})).size() == 1);
}

TEST_CASE("steps == 1 reports on the first slow step, and two slow ranks are both reported") {
  StragglerDetector d(1.5, 1);
  auto s = baseline(d, {10, 10, 10, 10, 10});
  const auto r = d.observe(step(s, {10, 30, 10, 10, 40}));
  REQUIRE(r.size() == 2);
  CHECK(r[0].stage == 1);
  CHECK(r[1].stage == 4);
}

TEST_CASE("with two ranks the slower one is measured against the other") {
  StragglerDetector d(2.0, 1);
  auto s = baseline(d, {10, 10});
  CHECK(d.observe(step(s++, {10, 19})).empty());
  const auto r = d.observe(step(s, {10, 25}));
  REQUIRE(r.size() == 1);
  CHECK(r[0].stage == 1);
  CHECK(r[0].peer_median_ms == doctest::Approx(10));
}

TEST_CASE("nothing is reported during the baseline steps, nor for balanced ranks") {
  StragglerDetector d(1.5, 1);
  CHECK(d.observe(step(0, {10, 100, 10})).empty());  // baseline: whatever it is, it is normal
  for (int s = 1; s < 20; ++s)
    CHECK(d.observe(step(s, {10.0 + s % 3, 11, 10.5, 12.0 - s % 2})).empty());
}

TEST_CASE("one rank, or a peer median of 0, is never flagged") {
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
