// conveyor watch RUN_DIR [--serve [HOST:]PORT] [--format text|json]
// A run folder's status, from its files (config.yaml, plan.json, metrics.jsonl), for a
// finished run or one still being written (apps/watch/). Without --serve: printed once
// (text, or the /api/status JSON alone on stdout). With --serve: served over HTTP until
// Ctrl-C or SIGTERM — /metrics (Prometheus), /api/status, /api/events and the live page
// at / — each request reading what the run wrote since the last; with --format json the
// first stdout line is {"url": ...} once the server listens (port 0: the port it picked).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "apps/commands.hpp"
#include "apps/watch/run_folder.hpp"
#include "apps/watch/status_json.hpp"
#include "apps/watch/status_server.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

struct WatchOptions {
  std::string dir;
  std::optional<std::string> serve;
  std::string format = "text";
};

void print_once(const watch::RunStatus& s, const std::string& format) {
  if (format == "json") {
    fmt::print("{}\n", watch::status_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  const auto& st = s.last_step;
  fmt::print("state {}; step {}{}", watch::run_state_name(s.state), s.steps_done(),
             s.total_steps ? fmt::format(" of {}", *s.total_steps) : std::string());
  if (st) fmt::print("; loss {:.4f}, {:.0f} tokens/s, bubble {:.1f}%", st->loss, st->tokens_per_s, 100 * st->bubble);
  if (s.eval_loss) fmt::print("; eval loss {:.4f}", *s.eval_loss);
  std::int64_t recoveries = 0;
  for (const auto& [kind, n] : s.recoveries) recoveries += n;
  fmt::print("; {} recoveries, {} checkpoints\n", recoveries, s.checkpoints);
}

// Serves until SIGINT or SIGTERM. The signals are blocked before the server's thread
// starts (it inherits the mask), so this thread alone takes them, in sigwait.
void serve_until_stopped(const WatchOptions& o, const watch::StatusServerSpec& spec) {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  {
    const auto server = watch::start_status_server(spec, o.dir, "conveyor watch");
    if (o.format == "json") {
      fmt::print("{}\n", nlohmann::json{{"url", server->url()}, {"port", server->port()}}.dump());
      std::fflush(stdout);
    }
    int signal = 0;
    sigwait(&stops, &signal);
    fmt::print(stderr, "conveyor watch: {}: the server stops\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  }  // the server closes its connections and joins its thread here
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
}

void run_watch(const WatchOptions& o) {
  watch::check_run_folder(o.dir);
  if (!o.serve) {
    watch::RunFolder folder(o.dir);
    folder.refresh();
    print_once(folder.status(), o.format);
    return;
  }
  const auto spec = watch::status_server_spec("--serve", *o.serve);  // bad values exit 2 before serving
  serve_until_stopped(o, spec);
}

}  // namespace

void add_watch_command(CLI::App& app) {
  auto opt = std::make_shared<WatchOptions>();
  auto* cmd = app.add_subcommand(
      "watch", "A run's status from its folder, finished or still training: printed once, or served over HTTP");
  cmd->add_option("run_dir", opt->dir, "Run folder (train --out): config.yaml, plan.json, metrics.jsonl")->required();
  cmd->add_option("--serve", opt->serve,
                  "Serve the status at [HOST:]PORT until Ctrl-C: /metrics (Prometheus), /api/status (JSON), "
                  "/api/events (server-sent events) and the live page at /. PORT alone binds 127.0.0.1; port 0 "
                  "picks a free one (the log line names the URL); a host beyond loopback needs the "
                  "CONVEYOR_SERVE_TOKEN variable set");
  cmd->add_option("--format", opt->format,
                  "text, or json: the /api/status JSON alone on stdout (with --serve: {\"url\": ...} once listening)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([opt] { run_watch(*opt); });
}

}  // namespace conveyor
