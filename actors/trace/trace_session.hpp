#pragma once
// The recorder of one process: its trace file and one TraceBuffer per writer (the
// coordinator, and every stage rank). Created by the app before the run, shared by the
// actors through the Job; buffers are created up front so no writer ever
// allocates or locks to find its own.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/trace/trace_buffer.hpp"

namespace conveyor::trace {

struct TraceOptions {
  std::filesystem::path dir;     // DIR/trace
  StepRange steps;               // trace.steps
  std::uint32_t process_index = 0;
  std::string host;              // empty: this machine's host name
  std::int64_t clock_offset_ns = 0;  // from the rendezvous, when several hosts run
  std::size_t buffer_records = 8192;
};

/// Renames an existing `file` to FILE.earlier-N (the first N free), printing where it went:
/// a resumed traced run writes its trace anew. THROWS std::runtime_error when it cannot.
void keep_earlier_trace(const std::filesystem::path& file);

class TraceSession {
 public:
  /// Creates `options.dir` and the process's trace file. Throws std::runtime_error.
  TraceSession(const TraceOptions& options, int stages);
  /// Flushes every buffer. REQUIRES: no writer is still adding records.
  ~TraceSession();

  TraceBuffer& coordinator() { return *buffers_.front(); }
  /// REQUIRES: 0 <= rank < stages.
  TraceBuffer& stage(int rank) { return *buffers_.at(static_cast<std::size_t>(rank) + 1); }
  /// REQUIRES: no writer is still adding records.
  void flush_all();
  /// The latest records of every writer, merged in start order (the watchdog's dump).
  std::vector<Record> recent(std::size_t per_writer) const;
  std::uint64_t bytes_written() const { return sink_->bytes_written(); }
  /// The trace file's first failed write, if any (TraceSink::failure).
  std::optional<std::string> failure() const { return sink_->failure(); }
  const std::filesystem::path& file() const { return sink_->path(); }

 private:
  std::shared_ptr<TraceSink> sink_;
  std::vector<std::unique_ptr<TraceBuffer>> buffers_;  // [0] coordinator, [r + 1] rank r
};

/// This machine's host name ("unknown" if it has none).
std::string local_host_name();

}  // namespace conveyor::trace
