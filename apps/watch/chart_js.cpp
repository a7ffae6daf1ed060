#include "apps/watch/chart_js.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace conveyor::watch {

std::filesystem::path chart_js_path() {
  if (const char* v = std::getenv(kChartJsVariable); v && *v) return v;
  return kDefaultChartJs;
}

HttpResponse ChartJsFile::serve() {
  const std::lock_guard lock(mutex_);
  if (!text_) {
    std::ifstream in(path_, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      if (in.good() || in.eof()) text_ = std::move(text).str();
    }
  }
  if (!text_)
    return reply(404, "text/plain; charset=utf-8",
                 fmt::format("404 not found: Chart.js is not at {} (install Debian's libjs-chart.js, or set {} to "
                             "the file); the page works without its charts\n",
                             path_.string(), kChartJsVariable));
  HttpResponse r = reply(200, "text/javascript; charset=utf-8", *text_);
  return r;
}

}  // namespace conveyor::watch
