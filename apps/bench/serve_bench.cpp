#include "apps/bench/serve_bench.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/bench/watch_client.hpp"
#include "kernels/common/error.hpp"
#include "kernels/common/spawn_process.hpp"

extern char** environ;

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

pid_t spawn_train(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv{"conveyor"};
  argv.insert(argv.end(), args.begin(), args.end());
  try {
    return spawn_process({.argv = argv,
                          .program = "/proc/self/exe",
                          .stdin_path = "/dev/null",
                          .stdout_path = "/dev/null",
                          .stderr_path = log});
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("bench serve: ") + e.what());
  }
}

// The port of "serving DIR at http://127.0.0.1:PORT/" in `log`, 0 once `pid` ended without it.
std::uint16_t logged_port(const fs::path& log, pid_t pid) {
  const std::regex url("serving .* at http://127\\.0\\.0\\.1:([0-9]+)/");
  for (;;) {
    std::smatch m;
    const std::string text = read_all(log);
    if (std::regex_search(text, m, url)) return static_cast<std::uint16_t>(std::stoi(m[1]));
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The summary row's tokens/s: the mean over the steps after the first two.
double summary_tokens_per_s(const fs::path& metrics) {
  std::istringstream lines(read_all(metrics));
  for (std::string line; std::getline(lines, line);) {
    const auto row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_object() && row.value("event", "") == "summary") return row.value("tokens_per_s", 0.0);
  }
  throw std::runtime_error("bench serve: " + metrics.string() + " has no summary row");
}

struct RunResult {
  double tokens_per_s = 0;
  WatchClientCounts counts;
};

RunResult run_once(const ServeBenchOptions& o, const fs::path& dir, bool served) {
  std::vector<std::string> args{"train", o.config, "--out", dir.string(), "--set",
                                "train.steps=" + std::to_string(o.steps), "--set", "train.eval_every=0"};
  for (const auto& s : o.overrides) {
    args.push_back("--set");
    args.push_back(s);
  }
  if (served) {
    args.push_back("--serve");
    args.push_back("127.0.0.1:0");
  }
  const fs::path log = dir.string() + ".err";
  const pid_t pid = spawn_train(args, log);
  RunResult r;
  std::unique_ptr<WatchClient> client;
  if (served) {
    if (const auto port = logged_port(log, pid))
      client = std::make_unique<WatchClient>(port, std::chrono::milliseconds(o.scrape_ms), pid);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (client) r.counts = client->stop();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(fmt::format("bench serve: {} failed (status {}): {}", dir.string(), status, read_all(log)));
  if (served && !client) throw std::runtime_error("bench serve: the served run logged no URL: " + read_all(log));
  r.tokens_per_s = summary_tokens_per_s(dir / "metrics.jsonl");
  return r;
}

double median(std::vector<double> v) {
  std::ranges::sort(v);
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

}  // namespace

nlohmann::json run_serve_bench(const ServeBenchOptions& o) {
  if (o.steps < 5) throw InputError(fmt::format("--steps {}: at least 5 (the first two are not counted)", o.steps));
  char pattern[] = "/tmp/conveyor_bench_serve_XXXXXX";
  if (!::mkdtemp(pattern)) throw std::runtime_error("bench serve: cannot create a temporary folder");
  const fs::path root = pattern;
  std::vector<double> plain, served;
  WatchClientCounts total;
  try {
    for (int p = 0; p < o.pairs; ++p)
      for (int k = 0; k < 2; ++k) {
        const bool with_server = (p % 2 == 0) == (k == 1);  // plain first in even pairs
        const auto r = run_once(o, root / fmt::format("pair{}-{}", p, with_server ? "served" : "plain"), with_server);
        (with_server ? served : plain).push_back(r.tokens_per_s);
        total.page_requests += r.counts.page_requests;
        total.events += r.counts.events;
        total.scrapes += r.counts.scrapes;
        total.failures += r.counts.failures;
        total.process_cpu_s += r.counts.process_cpu_s;
        total.server_cpu_s += r.counts.server_cpu_s;
        fmt::print(stderr, "bench serve: pair {}/{}: {}: {:.0f} tokens/s{}\n", p + 1, o.pairs,
                   with_server ? "served" : "plain", r.tokens_per_s,
                   with_server ? fmt::format(" ({} scrapes, {} events)", r.counts.scrapes, r.counts.events) : "");
      }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(root, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  const double a = median(plain), b = median(served);
  return {{"bench", "serve"},
          {"config", o.config},
          {"steps", o.steps},
          {"pairs", o.pairs},
          {"scrape_ms", o.scrape_ms},
          {"plain_tokens_per_s", plain},
          {"served_tokens_per_s", served},
          {"plain_median", a},
          {"served_median", b},
          {"ratio", a > 0 ? b / a : 0.0},
          {"slowdown", a > 0 ? 1.0 - b / a : 0.0},
          {"page_requests", total.page_requests},
          {"events", total.events},
          {"scrapes", total.scrapes},
          {"client_failures", total.failures},
          // The served runs' HTTP thread against all their threads, up to the last scrape:
          // the server's share of the CPU the training had, free of the machine's noise.
          {"server_cpu_s", total.server_cpu_s},
          {"served_process_cpu_s", total.process_cpu_s},
          {"server_cpu_share", total.process_cpu_s > 0 ? total.server_cpu_s / total.process_cpu_s : 0.0}};
}

std::string format_serve_bench_text(const nlohmann::json& r) {
  std::string out = fmt::format("bench serve: {} × {} steps, {} pairs (plain and served alternated)\n",
                                r.at("config").get<std::string>(), r.at("steps").get<std::int64_t>(),
                                r.at("pairs").get<int>());
  out += fmt::format("  plain  {:>10.0f} tokens/s (median; runs: {})\n", r.at("plain_median").get<double>(),
                     r.at("plain_tokens_per_s").dump());
  out += fmt::format("  served {:>10.0f} tokens/s (median; runs: {}), with a page on /api/events and /metrics "
                     "every {} ms\n",
                     r.at("served_median").get<double>(), r.at("served_tokens_per_s").dump(),
                     r.at("scrape_ms").get<std::int64_t>());
  out += fmt::format("  ratio  {:.4f} (slowdown {:+.2f}%); {} scrapes, {} events, {} page requests, {} failed\n",
                     r.at("ratio").get<double>(), 100 * r.at("slowdown").get<double>(), r.at("scrapes").get<std::int64_t>(),
                     r.at("events").get<std::int64_t>(), r.at("page_requests").get<std::int64_t>(),
                     r.at("client_failures").get<std::int64_t>());
  out += fmt::format("  the server's thread: {:.3f} CPU s of the served runs' {:.1f} ({:.3f}%)\n",
                     r.at("server_cpu_s").get<double>(), r.at("served_process_cpu_s").get<double>(),
                     100 * r.at("server_cpu_share").get<double>());
  return out;
}

}  // namespace conveyor
