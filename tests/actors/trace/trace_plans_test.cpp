// The plans beside a trace (DIR/trace/schedule.json) with data-parallel replicas: stage
// actors are replica-major, every replica runs the train plans of its pipeline rank, and
// replica 0 alone the evaluation plans.
#include "actors/trace/trace_plans.hpp"

#include <doctest/doctest.h>

#include "actors/plan/schedule/schedule.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::trace {
namespace {

sched::Schedule two_stage_1f1b() { return sched::make_schedule({"1f1b", 2, 4, 1}); }

std::vector<std::vector<sched::Action>> eval_plans() {
  return {{sched::Action::parse("0F0")}, {sched::Action::parse("1F0")}};
}

TEST_CASE("trace plans map each stage actor of 2 replicas to its pipeline rank's plan") {
  const auto schedule = two_stage_1f1b();
  const TracePlans plans =
      parse_trace_plans(trace_plans_json(schedule, eval_plans(), 1, 2).dump(), "schedule.json");
  REQUIRE(plans.replicas == 2);
  REQUIRE(plans.layout().stages == 2);
  for (int actor = 0; actor < 4; ++actor) {
    CAPTURE(actor);
    CHECK(plans.plan(actor, /*eval=*/false) == schedule.ranks[static_cast<std::size_t>(actor % 2)]);
  }
  CHECK(plans.plan(0, true).size() == 1);
  CHECK(plans.plan(1, true).size() == 1);
  CHECK(plans.plan(2, true).empty());  // replica 0 alone evaluates
  CHECK(plans.plan(3, true).empty());
  CHECK(plans.plan(4, false).empty());  // no such actor
  CHECK(plans.plan(-1, false).empty());
}

TEST_CASE("trace plans without replicas read as one replica, and a bad count is refused") {
  const auto schedule = two_stage_1f1b();
  auto j = trace_plans_json(schedule, eval_plans(), 1);
  CHECK_FALSE(j.contains("replicas"));
  CHECK(parse_trace_plans(j.dump(), "schedule.json").replicas == 1);
  // Records name stage actors in 16 bits: 2 stages a replica leave room for 16384 replicas.
  for (const auto* bad : {"0", "-1", "\"two\"", "1.5", "16385", "1000000000"}) {
    CAPTURE(bad);
    j["replicas"] = nlohmann::json::parse(bad);
    CHECK_THROWS_WITH_AS(parse_trace_plans(j.dump(), "s.json"),
                         doctest::Contains("s.json: \"replicas\" must be an integer in [1, 16384]"),
                         InputError);
  }
  j["replicas"] = 16384;
  CHECK(parse_trace_plans(j.dump(), "s.json").replicas == 16384);
}

TEST_CASE("a schedule.json whose sizes no run can have is refused before anything is sized by them") {
  const auto schedule = two_stage_1f1b();
  const auto good = trace_plans_json(schedule, eval_plans(), 1);
  // 65536 ranks x 65536 chunks: the tables indexed by (rank, chunk, micro-batch) took all
  // memory; 2^32 + 8 micro-batches wrapped to 8.
  auto wide = good;
  wide["train"]["stages"] = 65536;
  wide["train"]["virtual_stages"] = 65536;
  wide["train"]["ranks"] = nlohmann::json::array();
  for (int r = 0; r < 65536; ++r) wide["train"]["ranks"].push_back(nlohmann::json::array());
  CHECK_THROWS_WITH_AS(parse_trace_plans(wide.dump(), "s.json"),
                       doctest::Contains("65536 stages x 4 micro-batches x 65536 chunks is not a schedule"),
                       InputError);
  auto wrapped = good;
  wrapped["train"]["micro_batches"] = (std::int64_t{1} << 32) + 8;
  CHECK_THROWS_WITH_AS(parse_trace_plans(wrapped.dump(), "s.json"),
                       doctest::Contains("\"micro_batches\" = 4294967304 is out of range"), InputError);
  auto wave = good;
  wave["eval_wave"] = (std::int64_t{1} << 32) + 1;
  CHECK_THROWS_WITH_AS(parse_trace_plans(wave.dump(), "s.json"),
                       doctest::Contains("\"eval_wave\" must be an integer in [1, 2147483647]"), InputError);
}

TEST_CASE("an eval round's plan is the part of the whole evaluation its wave ran") {
  // Two chunks on each rank: the whole evaluation of 5 micro-batches runs chunk by chunk.
  std::vector<std::vector<sched::Action>> whole(2);
  for (int r = 0; r < 2; ++r)
    for (int chunk : {0, 1})
      for (int mb = 0; mb < 5; ++mb) whole[r].push_back(sched::Action{r, sched::ActionKind::F, mb, chunk});
  const auto schedule = sched::make_schedule({"zbv", 2, 4, 2});
  auto j = trace_plans_json(schedule, whole, 2);
  CHECK(j.at("eval_wave") == 2);
  const TracePlans plans = parse_trace_plans(j.dump(), "schedule.json");
  REQUIRE(plans.eval_wave == 2);
  const auto wave = plans.plan(1, /*eval=*/true, /*micro_batch=*/3);  // micro-batches 2, 3
  REQUIRE(wave.size() == 4);
  CHECK(wave[0] == (sched::Action{1, sched::ActionKind::F, 2, 0}));
  CHECK(wave[1] == (sched::Action{1, sched::ActionKind::F, 3, 0}));
  CHECK(wave[2] == (sched::Action{1, sched::ActionKind::F, 2, 1}));
  CHECK(wave[3] == (sched::Action{1, sched::ActionKind::F, 3, 1}));
  CHECK(plans.plan(0, true, 4).size() == 2);  // the last wave holds micro-batch 4 alone
  // A trace written before waves: one eval round held the whole evaluation.
  j.erase("eval_wave");
  CHECK(parse_trace_plans(j.dump(), "s.json").plan(1, true, 3) == whole[1]);
  for (const auto* bad : {"0", "\"two\""}) {
    CAPTURE(bad);
    j["eval_wave"] = nlohmann::json::parse(bad);
    CHECK_THROWS_WITH_AS(parse_trace_plans(j.dump(), "s.json"),
                         doctest::Contains("s.json: \"eval_wave\" must be an integer in [1, 2147483647]"),
                         InputError);
  }
}

TEST_CASE("schedule.json keeps every layout a re-plan moved onto, and a folder written before reads as one") {
  const auto three = sched::make_schedule({"1f1b", 3, 4, 1});
  const auto two = two_stage_1f1b();
  const std::vector<std::vector<sched::Action>> eval3 = {{}, {}, {}};
  auto doc = trace_plans_json(three, eval3, 1, 1, {0, {0, 1, 2}});
  CHECK(parse_trace_layouts(doc.dump(), "s.json").size() == 1);  // the run kept its layout
  add_relayout(doc, trace_plans_json(two, eval_plans(), 1, 1, {1, {0, 1}}));
  add_relayout(doc, trace_plans_json(three, eval3, 1, 1, {2, {0, 1, 2}}));
  const auto layouts = parse_trace_layouts(doc.dump(), "s.json");
  REQUIRE(layouts.size() == 3);
  for (int g = 0; g < 3; ++g) CHECK(layouts[static_cast<std::size_t>(g)].generation == g);
  CHECK(layouts[0].layout().actors() == 3);
  CHECK(layouts[1].layout().actors() == 2);
  CHECK(layouts[1].train.ranks == two.ranks);
  CHECK(layouts[1].node_of_actor == std::vector<int>{0, 1});
  CHECK(layouts[2].node_of_actor == std::vector<int>{0, 1, 2});
  // The started layout is the top level, as before layouts were saved.
  CHECK(parse_trace_plans(doc.dump(), "s.json").train.ranks == three.ranks);
  auto old = doc;
  old.erase("relayouts");
  old.erase("node_of_actor");
  const auto one = parse_trace_layouts(old.dump(), "s.json");
  REQUIRE(one.size() == 1);
  CHECK(one[0].node_of_actor.empty());
}

TEST_CASE("schedule.json's layouts out of order or with a wrong node list are refused naming the file") {
  const auto two = two_stage_1f1b();
  auto doc = trace_plans_json(two, eval_plans(), 1);
  auto skipped = doc;
  add_relayout(skipped, trace_plans_json(two, eval_plans(), 1, 1, {2, {}}));
  CHECK_THROWS_WITH_AS(parse_trace_layouts(skipped.dump(), "s.json"),
                       doctest::Contains("s.json: \"relayouts\" entry 0: \"generation\" must be 1"),
                       InputError);
  auto unnumbered = doc;
  add_relayout(unnumbered, trace_plans_json(two, eval_plans(), 1));  // generation 0: no key
  CHECK_THROWS_WITH_AS(parse_trace_layouts(unnumbered.dump(), "s.json"),
                       doctest::Contains("\"generation\" must be 1"), InputError);
  auto short_nodes = trace_plans_json(two, eval_plans(), 1, 1, {0, {0}});
  CHECK_THROWS_WITH_AS(parse_trace_layouts(short_nodes.dump(), "s.json"),
                       doctest::Contains("s.json: \"node_of_actor\" must list the node of each of the 2 stage actors"),
                       InputError);
  auto not_array = doc;
  not_array["relayouts"] = 3;
  CHECK_THROWS_WITH_AS(parse_trace_layouts(not_array.dump(), "s.json"),
                       doctest::Contains("\"relayouts\" must be an array"), InputError);
}

}  // namespace
}  // namespace conveyor::trace
