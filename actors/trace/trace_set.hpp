#pragma once
// A traced run, loaded for analysis: every process's file from DIR/trace/, merged onto
// the reference clock (each file's clock offset added), plus the plans the run executed.
// Pure: files in, values out; errors are InputError naming the file and the problem.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <vector>

#include "actors/trace/trace_file.hpp"
#include "actors/trace/trace_plans.hpp"

namespace conveyor::trace {

struct TraceSet {
  std::vector<FileHeader> hosts;     // one per file, in process-index order
  std::vector<Record> records;       // all files, times on the reference clock, by start
  std::vector<std::uint32_t> host_of;  // per record: index into hosts
  std::optional<TracePlans> plans;   // from schedule.json, if the folder has it
  std::vector<std::filesystem::path> inputs;  // the files read (load_trace_dir)

  /// Index of the record with `id`, or -1.
  std::int64_t find(std::uint64_t id) const;
  /// Earliest start over all records (0 if none).
  std::int64_t t0() const { return records.empty() ? 0 : records.front().start_ns; }

  std::unordered_map<std::uint64_t, std::size_t> by_id;
};

/// Merges already-read files (tests build them in memory).
TraceSet merge_trace_files(std::vector<TraceFile> files, std::optional<TracePlans> plans);
/// `dir` is a run folder (with trace/) or the trace folder itself.
TraceSet load_trace_dir(const std::filesystem::path& dir);

}  // namespace conveyor::trace
