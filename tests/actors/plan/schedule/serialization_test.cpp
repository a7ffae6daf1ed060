#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/csv.hpp"
#include "actors/plan/schedule/json.hpp"
#include "kernels/common/error.hpp"
#include "test_util.hpp"

using conveyor::InputError;
using namespace conveyor::sched;

TEST_CASE("Every generated schedule round-trips through CSV, with and without communication") {
  for (const ScheduleSpec& spec : test::all_specs(5, 12)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    CHECK(from_csv(to_csv(s), spec).ranks == s.ranks);
    const Schedule c = add_communication(s);
    CHECK(from_csv(to_csv(c), spec).ranks == c.ranks);
  }
}

TEST_CASE("CSV writes one row per rank and every chunk when there are several") {
  const Schedule s = make_schedule({"1f1b", 2, 2, 1});
  CHECK(to_csv(s) == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  const Schedule v = make_schedule({"zbv", 1, 1, 1});
  CHECK(to_csv(v) == "0F0c0,0F0c1,0I0c1,0W0c1,0I0c0,0W0c0\n");
}

TEST_CASE("CSV reading skips comments and empty cells and keeps an empty row as an idle rank") {
  const Schedule s = from_csv("# a comment\n0F0, ,0B0,\r\n\n2F0,2B0\n");
  REQUIRE(s.ranks.size() == 3);
  CHECK(s.ranks[0] == test::rank_list(0, "F0 B0"));
  CHECK(s.ranks[1].empty());
  CHECK(s.ranks[2] == test::rank_list(2, "F0 B0"));
}

TEST_CASE("CSV reading without a spec infers a custom one") {
  const Schedule s = from_csv("0F0c0,0F3c1\n1F2\n");
  CHECK(s.spec.name == "custom");
  CHECK(s.spec.stages == 2);
  CHECK(s.spec.micro_batches == 4);
  CHECK(s.spec.virtual_stages == 2);
  CHECK(s.chunks_per_rank() == 2);
}

TEST_CASE("CSV reading rejects a bad cell, a cell of another rank and a wrong row count") {
  CHECK_THROWS_WITH_AS(from_csv("0F0,0Q1\n"), doctest::Contains("line 1"), InputError);
  CHECK_THROWS_WITH_AS(from_csv("0F0\n0F1\n"), doctest::Contains("in the row of rank 1"),
                       InputError);
  CHECK_THROWS_WITH_AS(from_csv("0F0\n", {"1f1b", 2, 1, 1}), doctest::Contains("1 rows for stages = 2"),
                       InputError);
}

TEST_CASE("Every generated schedule round-trips through JSON, spec included") {
  for (const ScheduleSpec& spec : test::all_specs(4, 8)) {
    CAPTURE(test::describe(spec));
    const Schedule s = add_communication(make_schedule(spec));
    const Schedule back = from_json(to_json(s));
    CHECK(back.spec.name == spec.name);
    CHECK(back.spec.stages == spec.stages);
    CHECK(back.spec.micro_batches == spec.micro_batches);
    CHECK(back.spec.virtual_stages == spec.virtual_stages);
    CHECK(back.ranks == s.ranks);
  }
}

TEST_CASE("A schedule sits inside a larger JSON document") {
  const Schedule s = make_schedule({"interleaved-1f1b", 2, 2, 2});
  nlohmann::json doc{{"step", 3}, {"schedule", s}};
  CHECK(doc["schedule"]["ranks"][0][2] == "0F0c1");
  const Schedule back = doc["schedule"].get<Schedule>();
  CHECK(back.ranks == s.ranks);
}

TEST_CASE("JSON reading rejects malformed text, missing fields and bad actions") {
  CHECK_THROWS_AS(from_json("{"), InputError);
  CHECK_THROWS_WITH_AS(from_json(R"({"stages": 1, "micro_batches": 1, "ranks": []})"),
                       doctest::Contains("\"name\""), InputError);
  CHECK_THROWS_WITH_AS(from_json(R"({"name": "x", "stages": "2", "micro_batches": 1, "ranks": []})"),
                       doctest::Contains("\"stages\""), InputError);
  CHECK_THROWS_AS(from_json(R"({"name": "x", "stages": 1, "micro_batches": 1, "ranks": [["0Z0"]]})"),
                  InputError);
  CHECK_THROWS_WITH_AS(
      from_json(R"({"name": "x", "stages": 2, "micro_batches": 1, "ranks": [["0F0"], ["0B0"]]})"),
      doctest::Contains("ranks[1]"), InputError);
}
