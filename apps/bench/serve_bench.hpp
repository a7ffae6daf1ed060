#pragma once
// `conveyor bench serve [CONFIG]`: what watching a run costs the training. Runs the config
// as `conveyor train` child processes in pairs, one plain and one with `--serve` and a
// watcher attached (watch_client.hpp: a page on /api/events and a /metrics scrape every
// --scrape-ms), alternating which goes first so drift in the machine's speed falls on
// both alike; the figure is the ratio of the medians of the runs' mean tokens/s (the
// summary row of metrics.jsonl: steps after the first two).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

struct ServeBenchOptions {
  std::string config = "configs/tiny.yaml";
  std::vector<std::string> overrides;
  std::int64_t steps = 200;
  int pairs = 3;
  std::int64_t scrape_ms = 1000;
};

/// {"bench": "serve", "plain_tokens_per_s": [...], "served_tokens_per_s": [...],
///  "plain_median", "served_median", "ratio" (served / plain), "slowdown" (1 - ratio),
///  "scrapes", "events", "page_requests", "client_failures", ...}. Throws
/// std::runtime_error naming the run when a child fails.
nlohmann::json run_serve_bench(const ServeBenchOptions& options);

std::string format_serve_bench_text(const nlohmann::json& result);

}  // namespace conveyor
