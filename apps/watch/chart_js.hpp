#pragma once
// Chart.js for the live page, served by conveyor itself at /static/chart.js from Debian's
// libjs-chart.js install (read at run time: the binary does not carry a copy, and the page
// loads nothing from another host). CONVEYOR_CHART_JS names another file. When the file is
// absent the route answers 404 with what to install, and the page says so in place of its
// charts (page.js); everything else on the page works without it.
//
// Thread-safety: serve() may be called from any thread.
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "apps/watch/http_server.hpp"

namespace conveyor::watch {

/// libjs-chart.js's UMD build (Chart.js 3.9 in Debian 12): defines the global `Chart`.
inline constexpr const char* kDefaultChartJs = "/usr/share/javascript/chart.js/chart.min.js";
inline constexpr const char* kChartJsVariable = "CONVEYOR_CHART_JS";

/// CONVEYOR_CHART_JS when set and not empty, else kDefaultChartJs.
std::filesystem::path chart_js_path();

class ChartJsFile {
 public:
  explicit ChartJsFile(std::filesystem::path path) : path_(std::move(path)) {}
  /// 200 with the script, or 404 naming the path and the package. A file read once is kept
  /// (the package does not change under a run); a missing one is looked for again on the
  /// next request, so installing it while a server runs is enough.
  HttpResponse serve();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::mutex mutex_;
  std::optional<std::string> text_;
};

}  // namespace conveyor::watch
