// The coordinator's probe (actors/trace/coordinator_probe.hpp): issue 44's re-layouts go
// into its trace buffer as one record each, spanning the re-plan, and come back from the
// process's trace file as written.
#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

#include "actors/trace/coordinator_probe.hpp"
#include "actors/trace/trace_file.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor::testing {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("a shrink and a grow are traced on the coordinator's track as records spanning the re-plan's ms, naming the node") {
  const auto dir = fresh_dir("conveyor_probe_replan");
  {
    trace::TraceOptions o;
    o.dir = dir;
    o.host = "h";
    trace::TraceSession session(o, 3);
    trace::CoordinatorProbe probe(&session.coordinator());
    probe.round_started(8, 7, Phase::train);
    probe.relaid_out(false, 2, 7, 1012.5);
    probe.relaid_out(true, 1, 9, 40.0);
  }  // the session flushes its buffers into the file
  const auto f = trace::read_trace_file(dir / trace::trace_file_name(0));
  REQUIRE(f.records.size() == 3);
  const auto& shrink = f.records[1];
  const auto& grow = f.records[2];
  CHECK(shrink.kind == trace::RecordKind::replan);
  CHECK(grow.kind == trace::RecordKind::joined);
  for (const auto* r : {&shrink, &grow}) {
    CHECK(r->stage == trace::kCoordinator);
    CHECK(r->round == 8);
    CHECK(r->id != 0);
  }
  CHECK(shrink.peer == 2);
  CHECK(shrink.step == 7);
  CHECK(shrink.end_ns - shrink.start_ns == 1'012'500'000);
  CHECK(grow.peer == 1);
  CHECK(grow.step == 9);
  CHECK(grow.end_ns - grow.start_ns == 40'000'000);
  CHECK(grow.end_ns >= shrink.end_ns);  // recorded in order, on one clock
  std::filesystem::remove_all(dir);
}

TEST_CASE("a re-layout is traced also at a step outside trace.steps: the analysis pairs every round with its layout by it") {
  const auto dir = fresh_dir("conveyor_probe_replan_steps");
  {
    trace::TraceOptions o;
    o.dir = dir;
    o.host = "h";
    o.steps = *trace::StepRange::parse("0-5");
    trace::TraceSession session(o, 2);
    trace::CoordinatorProbe probe(&session.coordinator());
    probe.round_started(3, 7, Phase::train);  // not traced: step 7
    probe.relaid_out(false, 1, 7, 10.0);
    probe.relaid_out(true, 1, 5, 10.0);
  }
  const auto f = trace::read_trace_file(dir / trace::trace_file_name(0));
  REQUIRE(f.records.size() == 2);
  CHECK(f.records[0].kind == trace::RecordKind::replan);
  CHECK(f.records[0].step == 7);
  CHECK(f.records[0].round == 3);  // the last round the layout it left ran
  CHECK(f.records[1].kind == trace::RecordKind::joined);
  CHECK(f.records[1].step == 5);
  std::filesystem::remove_all(dir);
}

}  // namespace conveyor::testing
