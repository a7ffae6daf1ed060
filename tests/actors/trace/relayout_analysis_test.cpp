// Issue 44: the trace of a run that changed layout, read as it ran. The synthetic run: 3
// one-stage nodes on 1F1B for steps 0-2 (rounds 1-3); node 2 dies during step 2 (round 3,
// cut part-way), its trace file ending after round 1 (what it had handed to its file); the
// shrink's replan record; then 2 stages on nodes 0 and 1 from step 1 (rounds 4-6, steps
// 1-3), as the replay from the buddy copies of step 1 runs them.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/trace/timeline_svg.hpp"
#include "actors/trace/trace_check.hpp"
#include "actors/trace/trace_session.hpp"
#include "actors/trace/trace_summary.hpp"
#include "tests/actors/trace/trace_builder.hpp"

namespace conveyor::testing {
namespace {

using sched::ActionKind;

struct ShrunkRun {
  SyntheticTrace records;
  std::vector<trace::TracePlans> layouts;  // as schedule.json holds them

  trace::TraceSet set() const {
    trace::TraceFile f;
    f.header.host = "test";
    f.records = records.records;
    return trace::merge_trace_files({f}, layouts);
  }
};

ShrunkRun shrunk_run() {
  ShrunkRun run;
  run.records = simulated_trace(sched::make_schedule({"1f1b", 3, 4, 1}), 3);
  auto& records = run.records.records;
  // Round 3 stops a third of the way in: nothing later was run, sent or received.
  std::int64_t first = INT64_MAX, last = 0;
  for (const auto& r : records)
    if (r.round == 3) first = std::min(first, r.start_ns), last = std::max(last, r.end_ns);
  const std::int64_t cut = first + (last - first) / 3;
  std::erase_if(records, [&](const trace::Record& r) { return r.round == 3 && r.start_ns > cut; });
  // Node 2's file ends after round 1.
  std::erase_if(records, [](const trace::Record& r) { return r.stage == 2 && r.round >= 2; });
  trace::Record shrink;
  shrink.kind = trace::RecordKind::replan;
  shrink.id = trace::make_id(0, 1);
  shrink.stage = trace::kCoordinator;
  shrink.peer = 2;   // the node lost for good
  shrink.round = 3;  // the last round the coordinator started before it
  shrink.step = 1;   // the run goes on from step 1
  shrink.start_ns = cut + 1'000'000;
  shrink.end_ns = shrink.start_ns + 2'000'000'000;
  records.push_back(shrink);
  auto& started = run.layouts.emplace_back();
  started.train = sched::make_schedule({"1f1b", 3, 4, 1});
  started.node_of_actor = {0, 1, 2};
  auto& shrunk = run.layouts.emplace_back();
  shrunk.train = sched::make_schedule({"1f1b", 2, 4, 1});
  shrunk.generation = 1;
  shrunk.node_of_actor = {0, 1};
  append_rounds(run.records, simulated_trace(shrunk.train, 3), /*rounds=*/3, /*steps=*/1,
                /*ns=*/shrink.end_ns + 1'000'000);
  return run;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

std::string listing(const trace::CheckResult& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.kind + ": " + f.message + "\n";
  for (const auto& n : r.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace

TEST_CASE(
    "trace check of a run that shrank checks each round against its layout's plans and says once "
    "what the shrink cut") {
  const auto result = trace::check_trace(shrunk_run().set());
  INFO(listing(result));
  CHECK(result.ok());
  CHECK(result.rounds_checked == 6);
  CHECK(any_contains(
      result.notes,
      "layout generation 0 (3 stage actors; the layout the run started with): rounds 1-3"));
  CHECK(any_contains(result.notes,
                     "layout generation 1 (2 stage actors; from step 1, after node 2 was lost for "
                     "good): rounds 4-6"));
  CHECK(
      any_contains(result.notes,
                   "step 2 (round 3) was interrupted by the shrink when node 2 was lost for good"));
  CHECK(any_contains(result.notes, "node 2 was lost for good: "));
  CHECK(any_contains(result.notes, "stage actor(s) [2]"));
}

TEST_CASE("the same records read against the started layout alone are full of findings") {
  // What trace check said before layouts were saved: the shrunk rounds against the plans
  // of 3 stages, the cut round and the lost node's records as protocol violations.
  auto run = shrunk_run();
  run.layouts.resize(1);
  std::erase_if(run.records.records,
                [](const trace::Record& r) { return r.kind == trace::RecordKind::replan; });
  const auto result = trace::check_trace(run.set());
  INFO(listing(result));
  CHECK_FALSE(result.ok());
  CHECK(std::any_of(result.findings.begin(), result.findings.end(), [](const auto& f) {
    return f.message.find("stage 2 step 2 (round 5)") != std::string::npos;
  }));
}

TEST_CASE(
    "a schedule.json written before layouts were saved leaves the later layout's order unchecked, "
    "saying so") {
  auto run = shrunk_run();
  run.layouts.resize(1);  // the replan record is there; the plans of generation 1 are not
  const auto result = trace::check_trace(run.set());
  INFO(listing(result));
  CHECK(result.ok());
  CHECK(result.rounds_checked == 3);
  CHECK(any_contains(
      result.notes, "rounds 4-6 ran layout generation 1, whose plans schedule.json does not hold"));
}

TEST_CASE("after a shrink a stage that runs out of its new plan's order is still a finding") {
  auto run = shrunk_run();
  auto& records = run.records.records;
  // Stage 1 of the shrunk layout, step 2 (round 5): F1 and B0 the other way round.
  auto find = [&](ActionKind kind, int mb) -> trace::Record& {
    return *std::find_if(records.begin(), records.end(), [&](const trace::Record& r) {
      return r.kind == trace::RecordKind::action && r.round == 5 && r.stage == 1 &&
             r.action == static_cast<std::uint8_t>(kind) && r.micro_batch == mb;
    });
  };
  auto& f1 = find(ActionKind::F, 1);
  auto& b0 = find(ActionKind::B, 0);
  std::swap(f1.start_ns, b0.start_ns);
  std::swap(f1.end_ns, b0.end_ns);
  const auto result = trace::check_trace(run.set());
  INFO(listing(result));
  REQUIRE(result.findings.size() == 1);
  CHECK(result.findings[0].kind == "order");
  CHECK(result.findings[0].message.find("stage 1 step 2 (round 5)") != std::string::npos);
}

TEST_CASE("trace summary of a run that shrank summarises each layout with its own stages") {
  const auto summaries = trace::summarize_layouts(shrunk_run().set());
  REQUIRE(summaries.size() == 2);
  const auto& before = summaries[0];
  const auto& after = summaries[1];
  CHECK(before.generation == 0);
  CHECK(before.stages == 3);
  CHECK(before.steps == 2);  // round 3, cut by the shrink, is left out
  CHECK(any_contains(before.notes, "step 2 (round 3) is left out"));
  // Node 2's file ends after round 1: stage 2's row counts step 0 alone.
  CHECK(before.per_stage[2].steps_lost == 1);
  CHECK(before.per_stage[2].busy_fraction > 0.5);  // step 0 alone (with step 1 as idle: 32%)
  CHECK(before.per_stage[0].steps_lost == 0);
  CHECK(any_contains(before.notes, "stage 2: 1 of the 2 steps left out of its row"));
  CHECK(after.generation == 1);
  CHECK(after.stages == 2);
  CHECK(after.per_stage.size() == 2);
  CHECK(after.steps == 3);
  CHECK(after.from_step == 1);
  CHECK(after.change == "after node 2 was lost for good");
  REQUIRE(after.simulated_bubble);  // the 2-stage plans replayed with their own durations
  // Measured with the simulator's own durations: the same bubble.
  CHECK(after.bubble == doctest::Approx(*after.simulated_bubble).epsilon(0.05));
  const auto text = trace::summary_text(summaries);
  CHECK(text.find("layout generation 0: 3 stage actors, the layout the run started with") !=
        std::string::npos);
  CHECK(text.find(
            "layout generation 1: 2 stage actors, from step 1, after node 2 was lost for good") !=
        std::string::npos);
  const auto j = trace::summary_json(summaries);
  REQUIRE(j["layouts"].size() == 2);
  CHECK(j["layouts"][0]["stages"] == 3);
  CHECK(j["layouts"][1]["stages"] == 2);
  CHECK(j["layouts"][1]["generation"] == 1);
  CHECK(j["layouts"][1]["from_step"] == 1);
}

TEST_CASE("trace summary of a run that kept its layout is one summary, as before") {
  const auto summaries =
      trace::summarize_layouts(simulated_trace(sched::make_schedule({"1f1b", 3, 4, 1}), 2).set());
  REQUIRE(summaries.size() == 1);
  CHECK(summaries[0].stages == 3);
  CHECK_FALSE(trace::summary_json(summaries).contains("layouts"));
  CHECK(trace::summary_text(summaries).find("layout generation") == std::string::npos);
}

TEST_CASE(
    "trace draw of a run that shrank draws the stages of the layout that ran the steps drawn") {
  const auto set = shrunk_run().set();
  const auto last = trace::layout_timeline(set, {});
  CHECK(last.stages == 2);
  CHECK(last.title.find("step 3") == 0);
  CHECK(last.title.find("layout generation 1, 2 stage actors") != std::string::npos);
  trace::TimelineOptions around;
  around.steps = *trace::StepRange::parse("2");  // round 3 (cut) and round 5 (the replay)
  around.steps_given = true;
  const auto both = trace::layout_timeline(set, around);
  CHECK(both.stages == 3);
  CHECK(both.markers.size() == 3);  // two round starts and the shrink
  CHECK(both.title.find("layout generations 0-1") != std::string::npos);
}

TEST_CASE("a run that shrank and grew back is read as three layouts, the grow interrupting nothing") {
  auto run = shrunk_run();
  std::int64_t end = 0;
  for (const auto& r : run.records.records) end = std::max(end, r.end_ns);
  trace::Record grow;
  grow.kind = trace::RecordKind::joined;
  grow.id = trace::make_id(0, 2);
  grow.stage = trace::kCoordinator;
  grow.peer = 2;    // the node taken in
  grow.round = 6;   // at the boundary after round 6 (step 3)
  grow.step = 4;
  grow.start_ns = end + 1'000'000;
  grow.end_ns = grow.start_ns + 50'000'000;
  run.records.records.push_back(grow);
  auto& grown = run.layouts.emplace_back();
  grown.train = sched::make_schedule({"1f1b", 3, 4, 1});
  grown.generation = 2;
  grown.node_of_actor = {0, 1, 2};
  append_rounds(run.records, simulated_trace(grown.train, 2), /*rounds=*/6, /*steps=*/4,
                /*ns=*/grow.end_ns + 1'000'000);
  const auto set = run.set();
  const auto result = trace::check_trace(set);
  INFO(listing(result));
  CHECK(result.ok());
  CHECK(result.rounds_checked == 8);
  CHECK(any_contains(result.notes, "layout generation 2 (3 stage actors; from step 4, after node 2 joined): "
                                   "rounds 7-8"));
  CHECK_FALSE(any_contains(result.notes, "round 6) was interrupted"));
  const auto summaries = trace::summarize_layouts(set);
  REQUIRE(summaries.size() == 3);
  CHECK(summaries[1].steps == 3);  // the grow waited for the boundary: every round whole
  CHECK(summaries[2].stages == 3);
  CHECK(summaries[2].change == "after node 2 joined");
  CHECK(summaries[2].notes.empty());  // node 2's new process lost nothing
  CHECK(trace::layout_timeline(set, {}).stages == 3);
}

TEST_CASE(
    "two processes that ran the same stage actor one after the other write different record ids") {
  // A re-layout may move stage actor 1 from node 1 onto node 2: both files name writer 2.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("conveyor_relayout_ids_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::vector<std::uint64_t> ids;
  for (std::uint32_t process : {1u, 2u}) {
    trace::TraceOptions o;
    o.dir = dir;
    o.host = "h";
    o.process_index = process;
    trace::TraceSession session(o, 2);
    ids.push_back(session.stage(1).next_id());
    ids.push_back(session.stage(1).next_id());
  }
  std::filesystem::remove_all(dir);
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  for (auto id : ids) CHECK((id >> trace::kWriterShift) == 2);  // still stage actor 1's
}

}  // namespace conveyor::testing
