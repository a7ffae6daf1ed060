#include <doctest/doctest.h>

#include <cstring>

#include "actors/trace/step_range.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "actors/trace/trace_file.hpp"
#include "actors/trace/trace_set.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::testing {
namespace {

std::string file_with(const std::vector<trace::Record>& records, trace::FileHeader h = {}) {
  std::string bytes = trace::encode_header(h);
  bytes.append(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(trace::Record));
  return bytes;
}

trace::Record action(std::uint64_t seq) {
  trace::Record r;
  r.id = trace::make_id(2, seq);
  r.kind = trace::RecordKind::action;
  r.stage = 1;
  r.start_ns = 100 * static_cast<std::int64_t>(seq);
  r.end_ns = r.start_ns + 50;
  return r;
}

std::string error_of(const std::string& bytes) {
  try {
    trace::decode_trace_file(bytes, "t.ctrace");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a trace file reads back its header and records exactly") {
  trace::FileHeader h;
  h.host = "node-7";
  h.process_index = 3;
  h.clock_offset_ns = -12345;
  const auto f = trace::decode_trace_file(file_with({action(1), action(2)}, h), "t");
  CHECK(f.header.host == "node-7");
  CHECK(f.header.process_index == 3);
  CHECK(f.header.clock_offset_ns == -12345);
  REQUIRE(f.records.size() == 2);
  CHECK(f.records[1].id == trace::make_id(2, 2));
  CHECK(f.records[1].end_ns == 250);
}

TEST_CASE("a trace file with a wrong magic, version, truncated tail or corrupt record is refused") {
  auto good = file_with({action(1), action(2)});
  CHECK(error_of(good).empty());

  auto magic = good;
  magic[0] = 'X';
  CHECK(error_of(magic).find("wrong magic") != std::string::npos);

  auto version = good;
  const std::uint32_t v = 99;
  std::memcpy(version.data() + 8, &v, 4);
  CHECK(error_of(version).find("version 99 is not supported") != std::string::npos);

  CHECK(error_of(good.substr(0, good.size() - 10)).find("truncated") != std::string::npos);
  CHECK(error_of(good.substr(0, 12)).find("too short") != std::string::npos);

  auto corrupt = good;
  corrupt[corrupt.size() - 4] = static_cast<char>(200);  // the last record's kind
  CHECK(error_of(corrupt).find("record 1 is corrupt") != std::string::npos);

  // Below -1 (the coordinator, or no peer) no run writes a stage: readers index by it.
  for (const bool peer : {false, true}) {
    CAPTURE(peer);
    auto bad = action(2);
    (peer ? bad.peer : bad.stage) = -2;
    CHECK(error_of(file_with({action(1), bad})).find("record 1 is corrupt (stage") != std::string::npos);
  }
}

TEST_CASE("merged trace files must name stage actors the schedule has") {
  auto file = [](trace::Record r) {
    trace::TraceFile f;
    f.records = {r};
    return f;
  };
  auto far = action(1);
  far.stage = 7;
  // Without schedule.json any 16-bit stage is taken; with it, only its R x P actors.
  CHECK(trace::merge_trace_files({file(far)}, std::nullopt).records.size() == 1);
  trace::TracePlans plans;
  plans.train = sched::make_schedule({"1f1b", 2, 2, 1});
  CHECK_THROWS_WITH_AS(trace::merge_trace_files({file(far)}, plans),
                       doctest::Contains("names stage 7 and peer -1, but schedule.json has 2 stage actors"),
                       InputError);
  far.stage = 1;
  far.peer = 2;
  CHECK_THROWS_WITH_AS(trace::merge_trace_files({file(far)}, plans), doctest::Contains("peer 2"), InputError);
  far.peer = 0;
  CHECK(trace::merge_trace_files({file(far)}, plans).records.size() == 1);
}

TEST_CASE("trace.steps reads all, one step or an inclusive range, and nothing else") {
  CHECK(trace::StepRange::parse("all")->all());
  const auto one = *trace::StepRange::parse("12");
  CHECK(one.contains(12));
  CHECK_FALSE(one.contains(13));
  const auto range = *trace::StepRange::parse("10-20");
  CHECK(range.contains(10));
  CHECK(range.contains(20));
  CHECK_FALSE(range.contains(21));
  CHECK(range.str() == "10-20");
  for (const char* bad : {"", "20-10", "-3", "a-b", "1-", "5x"}) {
    INFO(bad);
    CHECK_FALSE(trace::StepRange::parse(bad).has_value());
  }
}

}  // namespace conveyor::testing
