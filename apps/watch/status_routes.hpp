#pragma once
// What the status server answers, by path, over one run folder:
//   /                  the live page (apps/watch/page/index.html, embedded: page_files.hpp)
//   /static/page.js,   its script and style, embedded likewise
//   /static/page.css
//   /static/chart.js   Chart.js from Debian's libjs-chart.js, read at run time (chart_js.hpp)
//   /metrics           Prometheus text (prometheus_text.hpp)
//   /api/status        JSON (status_json.hpp)
//   /api/events        server-sent events: the /api/status JSON, each time it changes
//   /api/timeline.svg  the newest traced step's pipeline timeline (timeline_source.hpp)
// and nothing else: every other path is 404, and no path reaches the filesystem but the
// run folder's own files and the one Chart.js file. Each status request first reads what
// the run wrote since the last one (run_folder.hpp): no polling thread, nothing read while
// nobody asks.
#include <filesystem>
#include <memory>
#include <mutex>

#include "apps/watch/chart_js.hpp"
#include "apps/watch/http_server.hpp"
#include "apps/watch/run_folder.hpp"
#include "apps/watch/timeline_source.hpp"

namespace conveyor::watch {

/// The run folder behind a server, shared by its requests. Thread-safe.
class StatusSource {
 public:
  explicit StatusSource(std::filesystem::path dir) : folder_(std::move(dir)) {}
  /// The status after reading what is new. Throws as RunFolder::refresh.
  RunStatus current();

 private:
  std::mutex mutex_;
  RunFolder folder_;
};

/// Everything a status server serves for one run. Thread-safe.
struct StatusSite {
  explicit StatusSite(const std::filesystem::path& run_dir, std::filesystem::path chart_js = chart_js_path())
      : status(run_dir), chart_js(std::move(chart_js)), timeline(run_dir) {}
  StatusSource status;
  ChartJsFile chart_js;
  TimelineSource timeline;
};

/// The handler of an HttpServer over `site`.
HttpHandler status_routes(std::shared_ptr<StatusSite> site);

}  // namespace conveyor::watch
