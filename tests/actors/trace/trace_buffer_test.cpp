#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

#include "actors/trace/trace_file.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor::testing {

TEST_CASE("trace buffers write their records to the process file in batches and keep the latest") {
  const auto dir = std::filesystem::temp_directory_path() / ("conveyor_trace_buffer_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    trace::TraceOptions o;
    o.dir = dir;
    o.host = "h";
    o.buffer_records = 8;  // batches of 4
    trace::TraceSession session(o, 2);
    auto& stage = session.stage(1);
    const auto header_bytes = session.bytes_written();
    for (int i = 0; i < 3; ++i) {
      trace::Record r;
      r.id = stage.next_id();
      r.stage = 1;
      r.start_ns = r.end_ns = i;
      stage.add(r);
    }
    CHECK(session.bytes_written() == header_bytes);  // below a batch: nothing written yet
    trace::Record r;
    r.id = stage.next_id();
    stage.add(r);
    CHECK(session.bytes_written() == header_bytes + 4 * sizeof(trace::Record));
    for (int i = 0; i < 10; ++i) {
      r.id = stage.next_id();
      r.start_ns = r.end_ns = 100 + i;
      stage.add(r);
    }
    const auto recent = stage.recent(3);
    REQUIRE(recent.size() == 3);
    CHECK(recent.back().start_ns == 109);
    CHECK(recent.front().start_ns == 107);
    CHECK(session.coordinator().next_id() == trace::make_id(0, 1));
  }  // the session flushes the rest
  const auto f = trace::read_trace_file(dir / trace::trace_file_name(0));
  CHECK(f.records.size() == 14);
  CHECK(f.records.front().id == trace::make_id(2, 1));
  CHECK(f.records.back().id == trace::make_id(2, 14));
  std::filesystem::remove_all(dir);
}

}  // namespace conveyor::testing

namespace conveyor::testing {

TEST_CASE("a trace file whose writes fail says so, and records after the failure are not written") {
  // /dev/full: every write fails with ENOSPC, as a full disk's would.
  trace::FileHeader header;
  header.host = "h";
  trace::TraceSink sink("/dev/full", header);
  REQUIRE(sink.failure());
  CHECK(sink.failure()->find("write failed after 0 bytes: No space left on device") != std::string::npos);
  trace::Record r;
  sink.write(&r, 1);
  CHECK(sink.failure()->find("after 0 bytes") != std::string::npos);  // the first failure is kept
}

TEST_CASE("a new trace session keeps a trace file already there under an earlier-N name") {
  const auto dir = std::filesystem::temp_directory_path() / ("conveyor_trace_keep_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  trace::TraceOptions o;
  o.dir = dir;
  o.host = "h";
  for (int run = 0; run < 3; ++run) trace::TraceSession session(o, 1);
  CHECK(std::filesystem::exists(dir / "process-0.ctrace"));
  CHECK(std::filesystem::exists(dir / "process-0.ctrace.earlier-1"));
  CHECK(std::filesystem::exists(dir / "process-0.ctrace.earlier-2"));
  CHECK_FALSE(std::filesystem::exists(dir / "process-0.ctrace.earlier-3"));
  std::filesystem::remove_all(dir);
}

}  // namespace conveyor::testing
