#include "apps/watch/status_routes.hpp"

#include "apps/watch/prometheus_text.hpp"
#include "apps/watch/status_json.hpp"
#include "apps/watch/status_page.hpp"

namespace conveyor::watch {
namespace {

std::string json_text(const RunStatus& s) {
  // Replace: a path in a row that is not UTF-8 must not fail the reply.
  return status_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

RunStatus StatusSource::current() {
  const std::lock_guard lock(mutex_);
  folder_.refresh();
  return folder_.status();
}

HttpHandler status_routes(std::shared_ptr<StatusSource> source) {
  return [source](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/metrics") return reply(200, std::string(kPrometheusContentType), prometheus_text(source->current()));
    if (req.path == "/api/status") return reply(200, "application/json", json_text(source->current()) + "\n");
    if (req.path == "/api/events") {
      // The first event at once, then one whenever the status changed.
      auto last = std::make_shared<std::string>(json_text(source->current()));
      HttpResponse res = reply(200, "text/event-stream", "data: " + *last + "\n\n");
      res.next_event = [source, last]() -> std::optional<std::string> {
        std::string now = json_text(source->current());
        if (now == *last) return std::nullopt;
        *last = now;
        return "data: " + now + "\n\n";
      };
      return res;
    }
    if (req.path == "/" || req.path == "/index.html")
      return reply(200, "text/html; charset=utf-8", status_page(source->current()));
    return reply(404, "text/plain; charset=utf-8",
                 "404 not found: this server has /, /metrics, /api/status and /api/events\n");
  };
}

}  // namespace conveyor::watch
