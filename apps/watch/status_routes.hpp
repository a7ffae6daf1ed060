#pragma once
// What the status server answers, by path, over one run folder:
//   /metrics      Prometheus text (prometheus_text.hpp)
//   /api/status   JSON (status_json.hpp)
//   /api/events   server-sent events: the /api/status JSON, each time it changes
//   /             a MINIMAL page for now (status_page.hpp): the live page with charts is
//                 still to come (issue 45)
// anything else is 404. Each request first reads what the run wrote since the last one
// (run_folder.hpp): no polling thread, nothing read while nobody asks.
#include <memory>
#include <mutex>

#include "apps/watch/http_server.hpp"
#include "apps/watch/run_folder.hpp"

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

/// The handler of an HttpServer over `source`.
HttpHandler status_routes(std::shared_ptr<StatusSource> source);

}  // namespace conveyor::watch
