#include "apps/watch/timeline_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "actors/trace/timeline_svg.hpp"
#include "actors/trace/trace_rounds.hpp"
#include "actors/trace/trace_set.hpp"

namespace conveyor::watch {
namespace {

// The newest train step traced whole. A run being traced writes its trace in batches, so
// its newest step may have only some of its actions yet (drawn, it would look like a
// stalled pipeline): a step counts as whole once it has as many actions as the most any
// train step of its layout has. A schedule's steps all have the same actions (a layout a
// re-plan moved onto, issue 44, has its own count); a finished run's last step is whole.
// nullopt when no train step is in the trace.
std::optional<std::int64_t> newest_whole_step(const trace::TraceSet& set) {
  const auto rounds = trace::split_rounds(set, trace::stage_count(set));
  std::map<int, std::size_t> most;  // by layout generation
  for (const auto& [n, r] : rounds)
    if (!r.eval) most[r.generation] = std::max(most[r.generation], r.action_count());
  std::optional<std::int64_t> step;
  for (const auto& [n, r] : rounds)
    if (!r.eval && r.action_count() == most[r.generation]) step = r.step;
  return step;
}

}  // namespace

std::string TimelineSource::signature() const {
  std::error_code ec;
  std::vector<std::string> parts;
  for (const auto& entry : std::filesystem::directory_iterator(trace_dir_, ec)) {
    std::error_code e;
    const auto size = entry.file_size(e);
    const auto time = entry.last_write_time(e).time_since_epoch().count();
    parts.push_back(fmt::format("{}:{}:{}", entry.path().filename().string(), e ? 0 : size, time));
  }
  std::ranges::sort(parts);
  std::string out;
  for (const auto& p : parts) out += p + ";";
  return out;
}

HttpResponse TimelineSource::serve() {
  const std::lock_guard lock(mutex_);
  std::error_code ec;
  if (!std::filesystem::is_directory(trace_dir_, ec))
    return reply(404, "text/plain; charset=utf-8",
                 "404 not found: this run is not traced (train with trace.enabled: true for the pipeline timeline)\n");
  const auto now = std::chrono::steady_clock::now();
  const std::string sig = signature();
  const bool due = !drawn_at_ || now - *drawn_at_ >= min_period_;
  if (sig != drawn_signature_ && due) {
    drawn_at_ = now;
    try {
      const auto set = trace::load_trace_dir(trace_dir_);
      trace::TimelineOptions options;
      if (const auto step = newest_whole_step(set)) {
        options.steps = trace::StepRange{*step, *step};
        options.steps_given = true;
      }
      svg_ = trace::render_svg(trace::layout_timeline(set, options));
      drawn_signature_ = sig;
    } catch (const std::exception& e) {
      // A batch half written, or no whole step yet: try again once the files change.
      why_none_ = e.what();
    }
  }
  if (!svg_)
    return reply(404, "text/plain; charset=utf-8", fmt::format("404 not found: no timeline yet: {}\n", why_none_));
  return reply(200, "image/svg+xml", *svg_);
}

}  // namespace conveyor::watch
