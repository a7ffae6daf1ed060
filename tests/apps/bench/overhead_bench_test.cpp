// `conveyor bench overhead`'s text form: a trace cost below zero is noise, shown as such.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "apps/bench/overhead_bench.hpp"

TEST_CASE("bench overhead text shows a negative trace cost as 0, within noise") {
  const nlohmann::json faster = {{"per_action_us", 1.5}, {"trace_cost_us_per_action", -0.25}};
  const std::string text = conveyor::format_overhead_text(faster);
  CHECK(text.find("trace_cost_us_per_action 0 (within noise: measured -0.25)\n") !=
        std::string::npos);
  CHECK(text.find("per_action_us            1.5\n") != std::string::npos);

  const nlohmann::json slower = {{"trace_cost_us_per_action", 0.5}};
  CHECK(conveyor::format_overhead_text(slower) == "trace_cost_us_per_action 0.5\n");
}
