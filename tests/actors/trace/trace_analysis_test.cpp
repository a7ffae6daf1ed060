#include <doctest/doctest.h>

#include <map>
#include <set>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/trace/chrome_export.hpp"
#include "actors/trace/interval_union.hpp"
#include "actors/trace/timeline_svg.hpp"
#include "actors/trace/trace_summary.hpp"
#include "tests/actors/trace/trace_builder.hpp"

namespace conveyor::testing {

TEST_CASE("trace summary of a simulated 1F1B step matches the simulator's own bubble") {
  const auto schedule = sched::make_schedule({"1f1b", 4, 8, 1});
  const auto set = simulated_trace(schedule, 2).set();
  const auto s = trace::summarize(set);
  CHECK(s.steps == 2);
  CHECK(s.stages == 4);
  // The trace was made by the simulator with 0.1 ms messages; replaying its durations
  // with free messages gives a shorter step, and the same busy time per stage.
  auto costs = sched::SimCosts::uniform(1000, 2000, 1000, 1000);
  costs.latency_us = 100;
  const auto sim = sched::simulate(schedule, costs);
  CHECK(s.step_ms == doctest::Approx(sim.makespan / 1e3).epsilon(1e-3));
  CHECK(s.bubble == doctest::Approx(sim.bubble).epsilon(1e-3));
  REQUIRE(s.simulated_step_ms.has_value());
  CHECK(*s.simulated_step_ms < s.step_ms);
  for (const auto& st : s.per_stage) {
    CHECK(st.busy_ms == doctest::Approx(2 * 8 * 3.0));  // 8 × (F 1 ms + B 2 ms), 2 steps
    CHECK(st.busy_fraction + st.bubble_fraction == doctest::Approx(1.0));
    CHECK(st.idle_fraction <= st.bubble_fraction + 1e-9);
  }
  CHECK(s.per_stage[0].messages == 2 * 8);  // gradients into stage 0
  CHECK(s.per_stage[1].messages == 2 * 16);  // activations and gradients
  CHECK(s.per_stage[1].comm_ms == doctest::Approx(2 * 16 * 0.1));
}

TEST_CASE("the critical path of a 1F1B step runs down the forwards and back up the backwards") {
  const auto schedule = sched::make_schedule({"1f1b", 3, 3, 1});
  const auto set = simulated_trace(schedule).set();
  const auto s = trace::summarize(set);
  // The last action is 0B2; its chain goes through every stage's work on the way.
  CHECK(s.path_text.rfind("0B2") == s.path_text.size() - 3);
  CHECK(s.path_text.find("0F0 → 1F0 → 2F0") == 0);
  CHECK(s.path.span_ns == static_cast<std::int64_t>(s.step_ms * 1e6));
  CHECK(s.path.compute_ns + s.path.wait_ns == s.path.span_ns);
  CHECK(s.path.wait_ns > 0);  // messages take 0.1 ms each
}

TEST_CASE("covered_ns counts overlapping spans once") {
  using trace::covered_ns;
  CHECK(covered_ns({}) == 0);
  CHECK(covered_ns({{0, 10}, {20, 25}}) == 15);
  CHECK(covered_ns({{20, 25}, {0, 10}, {5, 12}}) == 17);  // unsorted, overlapping
  CHECK(covered_ns({{0, 100}, {10, 20}, {30, 40}}) == 100);  // nested
  CHECK(covered_ns({{5, 5}, {9, 3}}) == 0);                 // empty and reversed
}

// A GPU stage's actions may overlap on the device (each chunk, or its weight gradients, on
// a stream of its own): busy time is what they cover, never more than the step, and the
// critical path's compute and waiting still add up to its span.
TEST_CASE("trace summary counts a stage's overlapping actions once and reports the overlap") {
  const auto schedule = sched::make_schedule({"1f1b", 2, 4, 1});
  auto synthetic = simulated_trace(schedule);
  std::int64_t stretched = 0;
  for (auto& r : synthetic.records)
    if (r.kind == trace::RecordKind::action && r.stage == 0) {
      r.end_ns += 1'500'000;  // 1.5 ms past its end: into the stage's next action
      stretched += 1'500'000;
    }
  const auto s = trace::summarize(synthetic.set());
  const auto& st0 = s.per_stage[0];
  CHECK(st0.busy_fraction <= 1.0 + 1e-9);
  CHECK(st0.bubble_fraction >= -1e-9);
  CHECK(st0.overlap_ms > 0);
  CHECK(st0.busy_ms + st0.overlap_ms == doctest::Approx(4 * 3.0 + stretched / 1e6));
  CHECK(s.per_stage[1].overlap_ms == 0);
  CHECK(s.path.compute_ns + s.path.wait_ns == s.path.span_ns);
  CHECK(s.path.compute_ns <= s.path.span_ns);
  for (const auto& step : s.path.steps) CHECK(step.wait_ns >= 0);
  CHECK(trace::summary_text(s).find("stage 0: actions overlapped") != std::string::npos);
  CHECK(trace::summary_json(s)["per_stage"][0]["overlap_ms"].get<double>() == doctest::Approx(st0.overlap_ms));
}

TEST_CASE("chrome export is trace-event JSON whose every flow has both ends") {
  const auto schedule = sched::make_schedule({"zbv", 2, 4, 1});
  const auto set = simulated_trace(schedule).set();
  const auto j = nlohmann::json::parse(trace::chrome_trace(set).dump());  // valid JSON text
  REQUIRE(j.contains("traceEvents"));
  std::map<std::string, std::set<std::string>> flows;
  std::size_t actions = 0;
  std::set<int> tids;
  for (const auto& e : j["traceEvents"]) {
    const auto ph = e["ph"].get<std::string>();
    if (ph == "s" || ph == "f") flows[e["id"].get<std::string>()].insert(ph);
    if (ph == "X") {
      CHECK(e["dur"].get<double>() >= 0);
      tids.insert(e["tid"].get<int>());
      if (e["cat"] == "action") ++actions;
    }
  }
  std::size_t scheduled = 0;
  for (const auto& r : schedule.ranks) scheduled += r.size();
  CHECK(actions == scheduled);
  CHECK_FALSE(flows.empty());
  for (const auto& [id, ends] : flows) {
    INFO("flow " << id);
    CHECK(ends == std::set<std::string>{"s", "f"});
  }
  // Stage 0 and 1 each have a compute, a send and a receive track.
  CHECK(tids == std::set<int>{4, 5, 6, 8, 9, 10});
}

TEST_CASE("chrome export draws a shrink and a grow as slices on the coordinator's compute track, named as their log lines") {
  const auto schedule = sched::make_schedule({"1f1b", 2, 2, 1});
  auto t = simulated_trace(schedule);
  trace::Record shrink;
  shrink.kind = trace::RecordKind::replan;
  shrink.id = trace::make_id(0, 1);
  shrink.stage = trace::kCoordinator;
  shrink.peer = 2;
  shrink.step = 0;
  shrink.start_ns = 1'000'000;
  shrink.end_ns = 3'500'000;
  trace::Record grow = shrink;
  grow.kind = trace::RecordKind::joined;
  grow.id = trace::make_id(0, 2);
  grow.peer = 1;
  grow.start_ns = 4'000'000;
  grow.end_ns = 4'100'000;
  t.records.push_back(shrink);
  t.records.push_back(grow);
  const auto set = t.set();
  const auto j = trace::chrome_trace(set);
  const double t0_us = static_cast<double>(set.t0()) / 1e3;
  std::map<std::string, nlohmann::json> slices;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && (e["cat"] == "replan" || e["cat"] == "joined")) slices[e["name"].get<std::string>()] = e;
  REQUIRE(slices.size() == 2);
  REQUIRE(slices.count("replan: node 2 lost for good"));
  REQUIRE(slices.count("joined: node 1 taken in"));
  const auto& s = slices["replan: node 2 lost for good"];
  CHECK(s["tid"] == 0);  // the coordinator's compute track
  CHECK(s["cat"] == "replan");
  CHECK(s["ts"].get<double>() == doctest::Approx(1000.0 - t0_us));
  CHECK(s["dur"].get<double>() == doctest::Approx(2500.0));
  CHECK(s["args"]["node"] == 2);
  CHECK(s["args"]["step"] == 0);
  const auto& g = slices["joined: node 1 taken in"];
  CHECK(g["tid"] == 0);
  CHECK(g["args"]["node"] == 1);
  CHECK(g["dur"].get<double>() == doctest::Approx(100.0));
}

TEST_CASE("chrome export puts each host on its own process and shifts it by its clock offset") {
  const auto schedule = sched::make_schedule({"1f1b", 2, 2, 1});
  auto t = simulated_trace(schedule);
  trace::TraceFile a, b;
  a.header.host = "a";
  b.header.host = "b";
  b.header.process_index = 1;
  b.header.clock_offset_ns = 5'000'000;  // host b's clock reads 5 ms behind the reference
  for (auto r : t.records) (r.stage == 0 ? a : b).records.push_back(r);
  for (auto& r : b.records) r.start_ns -= 5'000'000, r.end_ns -= 5'000'000;
  const auto merged = trace::merge_trace_files({a, b}, t.plans);
  const auto plain = t.set();
  REQUIRE(merged.records.size() == plain.records.size());
  for (std::size_t i = 0; i < plain.records.size(); ++i) CHECK(merged.records[i].start_ns == plain.records[i].start_ns);
  const auto j = trace::chrome_trace(merged);
  std::set<int> pids;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
  CHECK(pids == std::set<int>{0, 1});
}

TEST_CASE("the timeline draws one box per action of the step, bubbles as background") {
  const auto schedule = sched::make_schedule({"zb-h1", 3, 6, 1});
  const auto set = simulated_trace(schedule, 2).set();
  const auto layout = trace::layout_timeline(set, {});
  CHECK(layout.title.find("step 1") == 0);  // the last step by default
  std::size_t scheduled = 0;
  for (const auto& r : schedule.ranks) scheduled += r.size();
  CHECK(layout.boxes.size() == scheduled);
  for (const auto& b : layout.boxes) {
    CHECK(b.x >= 80 - 1e-9);
    CHECK(b.x + b.width <= layout.width - 20 + 1e-6);
  }
  const auto svg = trace::render_svg(layout);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("#f28e2b") != std::string::npos);  // I boxes
  CHECK(svg.find("#b07aa1") != std::string::npos);  // W boxes
  trace::TimelineOptions both;
  both.steps = *trace::StepRange::parse("0-1");
  both.steps_given = true;
  CHECK(trace::layout_timeline(set, both).boxes.size() == 2 * scheduled);
  both.steps = *trace::StepRange::parse("7");
  CHECK_THROWS_WITH(trace::layout_timeline(set, both), doctest::Contains("no action of steps 7"));
}

}  // namespace conveyor::testing
