// fault.max_restarts within fault.window_s, as a sliding window.
#include <doctest/doctest.h>

#include "actors/fault/restart_budget.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

TEST_CASE("recoveries beyond max_restarts within the window are refused, older ones expire") {
  RestartBudget budget(2, 10.0);
  const auto t0 = RestartBudget::Clock::time_point{} + 100s;
  CHECK(budget.admit(t0));
  CHECK(budget.admit(t0 + 1s));
  CHECK_FALSE(budget.admit(t0 + 2s));
  CHECK(budget.used(t0 + 2s) == 2);  // the refused one is not counted
  CHECK(budget.admit(t0 + 10s));     // the first expired
  CHECK(budget.used(t0 + 10s) == 2);
  CHECK_FALSE(budget.admit(t0 + 10500ms));
}

TEST_CASE("max_restarts 0 refuses every recovery, bad settings are rejected") {
  RestartBudget none(0, 1.0);
  CHECK_FALSE(none.admit(RestartBudget::Clock::now()));
  CHECK_THROWS_AS(RestartBudget(-1, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(RestartBudget(1, 0.0), std::invalid_argument);
}
