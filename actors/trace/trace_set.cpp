#include "actors/trace/trace_set.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <numeric>
#include <sstream>

#include "kernels/common/error.hpp"

namespace conveyor::trace {

std::int64_t TraceSet::find(std::uint64_t id) const {
  auto it = by_id.find(id);
  return it == by_id.end() ? -1 : static_cast<std::int64_t>(it->second);
}

std::int64_t TraceSet::cause_of(const Record& r) const {
  const auto i = r.cause ? find(r.cause) : -1;
  if (i < 0 || switches.empty()) return i;
  return generation_of(records[static_cast<std::size_t>(i)].round) == generation_of(r.round) ? i : -1;
}

const TracePlans* TraceSet::layout(int generation) const {
  if (generation == 0) return plans ? &*plans : nullptr;
  if (generation < 0 || static_cast<std::size_t>(generation) > relayouts.size()) return nullptr;
  return &relayouts[static_cast<std::size_t>(generation) - 1];
}

int TraceSet::most_actors() const {
  int n = plans ? plans->layout().actors() : 0;
  for (const auto& p : relayouts) n = std::max(n, p.layout().actors());
  return n;
}

TraceSet merge_trace_files(std::vector<TraceFile> files, std::optional<TracePlans> plans) {
  std::vector<TracePlans> layouts;
  if (plans) layouts.push_back(std::move(*plans));
  return merge_trace_files(std::move(files), std::move(layouts));
}

TraceSet merge_trace_files(std::vector<TraceFile> files, std::vector<TracePlans> layouts) {
  std::sort(files.begin(), files.end(), [](const TraceFile& a, const TraceFile& b) {
    return a.header.process_index < b.header.process_index;
  });
  TraceSet set;
  if (!layouts.empty()) {
    set.plans = std::move(layouts.front());
    set.relayouts.assign(std::make_move_iterator(layouts.begin() + 1), std::make_move_iterator(layouts.end()));
  }
  std::vector<std::pair<Record, std::uint32_t>> all;
  for (std::uint32_t h = 0; h < files.size(); ++h) {
    set.hosts.push_back(files[h].header);
    for (Record r : files[h].records) {
      r.start_ns += files[h].header.clock_offset_ns;
      r.end_ns += files[h].header.clock_offset_ns;
      all.emplace_back(r, h);
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first.start_ns < b.first.start_ns; });
  const int actors = set.plans ? set.most_actors() : kMaxTracedActors;
  for (auto& [r, h] : all) {
    if (!set.by_id.emplace(r.id, set.records.size()).second)
      throw InputError(fmt::format("trace: record id {:#x} appears twice", r.id));
    if (r.stage >= actors || (r.peer >= actors && !peer_is_node(r.kind)))
      throw InputError(fmt::format("trace: record id {:#x} names stage {} and peer {}, but "
                                   "schedule.json has {} stage actors{}",
                                   r.id, r.stage, r.peer, actors,
                                   set.relayouts.empty() ? "" : " in its largest layout"));
    set.records.push_back(r);
    set.host_of.push_back(h);
  }
  set.switches = find_layout_switches(set.records);
  return set;
}

TraceSet load_trace_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw InputError(fmt::format("{}: {} (expected a run folder or its trace/ folder)", dir.string(),
                                 fs::exists(dir) ? "not a folder" : "no such folder"));
  fs::path tdir = dir;
  if (!fs::is_regular_file(dir / "schedule.json") && fs::is_directory(dir / "trace")) tdir = dir / "trace";
  std::vector<TraceFile> files;
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(tdir))
    if (e.is_regular_file() && e.path().extension() == kTraceExtension) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  if (paths.empty())
    throw InputError(fmt::format("{}: no trace files (*{}); was the run traced (trace.enabled: true)?",
                                 tdir.string(), kTraceExtension));
  for (const auto& p : paths) files.push_back(read_trace_file(p));
  std::vector<fs::path> inputs = paths;
  std::vector<TracePlans> layouts;
  const fs::path sched = tdir / "schedule.json";
  if (fs::is_regular_file(sched)) {
    std::ifstream in(sched);
    std::ostringstream text;
    text << in.rdbuf();
    layouts = parse_trace_layouts(text.str(), sched.string());
    inputs.push_back(sched);
  }
  TraceSet set = merge_trace_files(std::move(files), std::move(layouts));
  set.inputs = std::move(inputs);
  return set;
}

}  // namespace conveyor::trace
