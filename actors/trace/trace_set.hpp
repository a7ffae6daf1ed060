#pragma once
// A traced run, loaded for analysis: every process's file from DIR/trace/, merged onto
// the reference clock (each file's clock offset added), plus the plans the run executed:
// with issue 44's re-layouts, those of every layout it ran, and the records that mark
// which rounds ran which (layout_switch.hpp).
// Pure: files in, values out; errors are InputError naming the file and the problem.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <vector>

#include "actors/trace/layout_switch.hpp"
#include "actors/trace/trace_file.hpp"
#include "actors/trace/trace_plans.hpp"

namespace conveyor::trace {

struct TraceSet {
  std::vector<FileHeader> hosts;     // one per file, in process-index order
  std::vector<Record> records;       // all files, times on the reference clock, by start
  std::vector<std::uint32_t> host_of;  // per record: index into hosts
  std::optional<TracePlans> plans;   // from schedule.json, if the folder has it: the
                                     // layout the run started with (generation 0)
  std::vector<TracePlans> relayouts;  // the layouts it moved onto, generation 1, 2, …
  std::vector<LayoutSwitch> switches;  // where it moved: its replan and joined records
  std::vector<std::filesystem::path> inputs;  // the files read (load_trace_dir)

  /// Index of the record with `id`, or -1.
  std::int64_t find(std::uint64_t id) const;
  /// Index of the record `r` cites as its cause, or -1: none, or one that a round of
  /// another layout generation wrote. A cause never crosses a change of layout (the old
  /// stage actors are gone), but an id may repeat across it: a node started again after a
  /// shrink counts its ids from where its lost process did, which a survivor's records may
  /// cite though the lost file never got them.
  std::int64_t cause_of(const Record& r) const;
  /// Earliest start over all records (0 if none).
  std::int64_t t0() const { return records.empty() ? 0 : records.front().start_ns; }
  /// The layout generation that ran round `round` (0 when the layout never changed).
  int generation_of(std::uint32_t round) const { return trace::generation_of(switches, round); }
  /// The plans of layout `generation`; null when schedule.json does not hold them (no
  /// schedule.json, or one written before layouts were saved).
  const TracePlans* layout(int generation) const;
  /// The plans of the layout that ran round `round`, or null.
  const TracePlans* plans_of(std::uint32_t round) const { return layout(generation_of(round)); }
  /// The most stage actors of any layout the plans hold (0 without plans).
  int most_actors() const;

  std::unordered_map<std::uint64_t, std::size_t> by_id;
};

/// Merges already-read files (tests build them in memory).
TraceSet merge_trace_files(std::vector<TraceFile> files, std::optional<TracePlans> plans);
/// The same with every layout's plans, [0] the started one (parse_trace_layouts).
TraceSet merge_trace_files(std::vector<TraceFile> files, std::vector<TracePlans> layouts);
/// `dir` is a run folder (with trace/) or the trace folder itself.
TraceSet load_trace_dir(const std::filesystem::path& dir);

}  // namespace conveyor::trace
