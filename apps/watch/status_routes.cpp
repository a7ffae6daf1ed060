#include "apps/watch/status_routes.hpp"

#include "apps/watch/page_files.hpp"
#include "apps/watch/prometheus_text.hpp"
#include "apps/watch/status_json.hpp"

namespace conveyor::watch {
namespace {

std::string json_text(const RunStatus& s) {
  // Replace: a path in a row that is not UTF-8 must not fail the reply.
  return status_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse page_file(const EmbeddedFile& f) {
  return reply(200, std::string(page_content_type(f.name)), std::string(f.text));
}

HttpResponse not_found() {
  return reply(404, "text/plain; charset=utf-8",
               "404 not found: this server has /, /metrics, /api/status, /api/events, /api/timeline.svg and "
               "/static/ (the page's own files)\n");
}

HttpResponse events(const std::shared_ptr<StatusSite>& site) {
  // The first event at once, then one whenever the status changed.
  auto last = std::make_shared<std::string>(json_text(site->status.current()));
  HttpResponse res = reply(200, "text/event-stream", "data: " + *last + "\n\n");
  res.next_event = [site, last]() -> std::optional<std::string> {
    std::string now = json_text(site->status.current());
    if (now == *last) return std::nullopt;
    *last = now;
    return "data: " + now + "\n\n";
  };
  return res;
}

}  // namespace

RunStatus StatusSource::current() {
  const std::lock_guard lock(mutex_);
  folder_.refresh();
  return folder_.status();
}

HttpHandler status_routes(std::shared_ptr<StatusSite> site) {
  return [site](const HttpRequest& req) -> HttpResponse {
    const std::string& path = req.path;
    if (path == "/metrics")
      return reply(200, std::string(kPrometheusContentType), prometheus_text(site->status.current()));
    if (path == "/api/status") return reply(200, "application/json", json_text(site->status.current()) + "\n");
    if (path == "/api/events") return events(site);
    if (path == "/api/timeline.svg") return site->timeline.serve();
    if (path == "/" || path == "/index.html") {
      if (const auto* f = find_page_file("index.html")) return page_file(*f);
    }
    constexpr std::string_view kStatic = "/static/";
    if (path.starts_with(kStatic)) {
      const std::string_view name = std::string_view(path).substr(kStatic.size());
      if (name == "chart.js") return site->chart_js.serve();
      // Only the embedded files' own names: "../x" or "a/b" name none of them.
      if (const auto* f = find_page_file(name)) return page_file(*f);
    }
    return not_found();
  };
}

}  // namespace conveyor::watch
