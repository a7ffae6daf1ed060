#pragma once
// The pipeline timeline of a run's newest traced step, as the SVG `conveyor trace draw`
// makes (actors/trace/timeline_svg.hpp), for the live page's /api/timeline.svg: the newest
// step traced whole (a step still being written is left for the next drawing). Only a
// run with trace.enabled has one (RUN_DIR/trace/).
//
// A trace is drawn again only when its files changed and at least min_period passed since
// the last drawing: loading a long trace costs time on the server's one io thread, and a
// page asks on every step. A trace being written can end in a partial batch that does not
// load; the last drawing is served until a newer one loads.
//
// Thread-safety: svg() may be called from any thread (a mutex: concurrent askers wait for
// one drawing).
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "apps/watch/http_server.hpp"

namespace conveyor::watch {

class TimelineSource {
 public:
  explicit TimelineSource(std::filesystem::path run_dir,
                          std::chrono::milliseconds min_period = std::chrono::seconds(5))
      : trace_dir_(std::move(run_dir) / "trace"), min_period_(min_period) {}

  /// 200 with the SVG (image/svg+xml), or 404 saying why there is none (the run is not
  /// traced, or no traced step is readable yet).
  HttpResponse serve();

 private:
  // Names, sizes and modification times of the trace folder's files: changes when any grows.
  std::string signature() const;

  std::filesystem::path trace_dir_;
  std::chrono::milliseconds min_period_;
  std::mutex mutex_;
  std::string drawn_signature_;
  std::optional<std::string> svg_;
  std::string why_none_ = "no traced step yet";
  std::optional<std::chrono::steady_clock::time_point> drawn_at_;
};

}  // namespace conveyor::watch
