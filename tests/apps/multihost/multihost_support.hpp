#pragma once
// Runs several `conveyor train` processes at once, as the nodes of one job on loopback:
// each with its own arguments and extra environment variables, stdout and stderr in files
// of a temporary folder, and one deadline for all (a process still running then is killed
// and the test fails, so a hang never hangs the suite). Ports come from the kernel (bind
// port 0), so concurrent tests and other jobs on the machine do not collide.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "kernels/common/spawn_process.hpp"

extern char** environ;

namespace conveyor::testing {

/// A TCP port that was free a moment ago on 127.0.0.1 (the kernel's choice for port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("free_port: cannot bind port 0");
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A TCP port that was free a moment ago on ::1; nullopt where this host has no IPv6 loopback.
inline std::optional<int> free_ipv6_port() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof a;
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!bound) return std::nullopt;
  return ntohs(a.sin6_port);
}

struct NodeRun {
  std::vector<std::string> args;            // after `conveyor`
  std::map<std::string, std::string> env;   // added to (or replacing in) this environment
  std::vector<std::string> wrapper;         // a command in front, e.g. ip netns exec A
  // Not empty: SIGKILL this node once node 0's stderr contains this text (a node that
  // dies at a known point, e.g. "step 1/", the first progress line).
  std::string kill_when_node0_says;
  // >= 0: the same, once node 0's progress lines ("step N/…") reach step N >= this (they
  // are printed a few times a second, not for every step).
  int kill_at_node0_step = -1;
  // The signal sent then: SIGSTOP freezes the node (its sockets stay open, only its
  // silence shows); a stopped node is killed once every other node has ended.
  int kill_signal = SIGKILL;
  // > 0 with SIGSTOP: SIGCONT this long after the stop (a node frozen for a while, which
  // comes back after the others gave up on it).
  std::chrono::milliseconds continue_after{0};
  // Once the killed node has exited, start it again with the same arguments and
  // environment (a replacement that rejoins the running job).
  bool restart_after_kill = false;
  // Not empty, with restart_after_kill: start it again only once node 0's stderr also
  // contains this text (a node that joins after the job shrank without it).
  std::string restart_when_node0_says;
  // Not empty, with restart_after_kill: SIGKILL the restarted process too once node 0's
  // stderr contains this text (lost again after it joined); it is not started a third time.
  std::string kill_again_when_node0_says;
  // Not empty: NodeResult::said_at is when this node's stderr first held this text (read
  // every 20 ms, so up to that much late).
  std::string time_when_says;
};

struct NodeResult {
  int exit_code = -1;  // of the last process that ran the node
  std::string out, err;
  bool timed_out = false;
  // A node restarted after its kill: the killed process's exit code and stderr.
  int killed_exit_code = -1;
  std::string killed_err;
  // When the node was sent kill_signal, and when its stderr first held time_when_says;
  // nullopt: never.
  std::optional<std::chrono::steady_clock::time_point> signalled_at, said_at;
};

/// The highest N of the progress lines "step N/…" in `log`; -1 when none.
inline int latest_progress_step(const std::string& log) {
  int latest = -1;
  for (std::size_t at = log.find("step "); at != std::string::npos; at = log.find("step ", at + 5)) {
    if (at > 0 && log[at - 1] != '\n') continue;  // a progress line starts with it
    std::size_t end = at + 5;
    while (end < log.size() && std::isdigit(static_cast<unsigned char>(log[end]))) ++end;
    if (end > at + 5 && end < log.size() && log[end] == '/') latest = std::max(latest, std::stoi(log.substr(at + 5, end - at - 5)));
  }
  return latest;
}

/// The progress line "step N/…" of step n in `log` (without its newline); empty when none.
inline std::string progress_line(const std::string& log, int n) {
  const std::string head = "step " + std::to_string(n) + "/";
  for (std::size_t at = log.find(head); at != std::string::npos; at = log.find(head, at + 1))
    if (at == 0 || log[at - 1] == '\n') return log.substr(at, log.find('\n', at) - at);
  return {};
}

/// Starts every node, waits for all (at most timeout_s), returns their results in order.
inline std::vector<NodeResult> run_nodes(const TempDir& dir, const std::vector<NodeRun>& nodes,
                                         int timeout_s = 120) {
  std::vector<pid_t> pids(nodes.size(), -1);
  std::vector<std::string> outs(nodes.size()), errs(nodes.size());
  // Starts node i; its stdout and stderr go to node<i><suffix>.out / .err.
  auto start = [&](std::size_t i, const std::string& suffix) {
    const auto& n = nodes[i];
    std::vector<std::string> argv = n.wrapper;
    argv.push_back(CONVEYOR_BINARY);
    argv.insert(argv.end(), n.args.begin(), n.args.end());
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const auto eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : n.env) env[k] = v;
    std::vector<std::string> env_lines;
    for (const auto& [k, v] : env) env_lines.push_back(k + "=" + v);
    outs[i] = dir / ("node" + std::to_string(i) + suffix + ".out");
    errs[i] = dir / ("node" + std::to_string(i) + suffix + ".err");
    pids[i] = spawn_process({.argv = argv,
                             .stdin_path = "/dev/null",
                             .stdout_path = outs[i],
                             .stderr_path = errs[i],
                             .working_dir = CONVEYOR_SOURCE_DIR,
                             .env = env_lines});
  };
  for (std::size_t i = 0; i < nodes.size(); ++i) start(i, "");
  const std::string node0_err = errs[0];
  std::vector<NodeResult> results(nodes.size());
  std::vector<bool> done(nodes.size(), false), signalled(nodes.size(), false),
      continued(nodes.size(), false), awaiting_restart(nodes.size(), false), killed_again(nodes.size(), false);
  std::vector<std::chrono::steady_clock::time_point> signalled_at(nodes.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::size_t left = nodes.size();
  while (left > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      if (awaiting_restart[i]) {
        if (read_text(node0_err).find(nodes[i].restart_when_node0_says) != std::string::npos) {
          awaiting_restart[i] = false;
          start(i, ".restarted");
        } else if (done[0]) {  // never said: the node is not started again (exit_code -1)
          awaiting_restart[i] = false;
          done[i] = true;
          --left;
        }
        continue;
      }
      if (results[i].killed_exit_code >= 0 && !killed_again[i] && !nodes[i].kill_again_when_node0_says.empty() &&
          read_text(node0_err).find(nodes[i].kill_again_when_node0_says) != std::string::npos) {
        ::kill(pids[i], SIGKILL);
        killed_again[i] = true;
      }
      const bool kill_due =
          (!nodes[i].kill_when_node0_says.empty() &&
           read_text(node0_err).find(nodes[i].kill_when_node0_says) != std::string::npos) ||
          (nodes[i].kill_at_node0_step >= 0 && latest_progress_step(read_text(node0_err)) >= nodes[i].kill_at_node0_step);
      if (!signalled[i] && kill_due) {
        ::kill(pids[i], nodes[i].kill_signal);
        signalled[i] = true;
        signalled_at[i] = std::chrono::steady_clock::now();
        results[i].signalled_at = signalled_at[i];
      }
      // Read before waitpid: a node that said it and exited since is timed no later than
      // its reaping.
      if (!results[i].said_at && !nodes[i].time_when_says.empty() &&
          read_text(errs[i]).find(nodes[i].time_when_says) != std::string::npos)
        results[i].said_at = std::chrono::steady_clock::now();
      if (signalled[i] && !continued[i] && nodes[i].continue_after.count() > 0 &&
          std::chrono::steady_clock::now() - signalled_at[i] >= nodes[i].continue_after) {
        ::kill(pids[i], SIGCONT);
        continued[i] = true;
      }
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (signalled[i] && nodes[i].restart_after_kill && results[i].killed_exit_code < 0) {
          results[i].killed_exit_code = code;
          results[i].killed_err = read_text(errs[i]);
          if (nodes[i].restart_when_node0_says.empty())
            start(i, ".restarted");
          else
            awaiting_restart[i] = true;
          continue;
        }
        results[i].exit_code = code;
        done[i] = true;
        --left;
      }
    }
    if (left == 0) break;
    std::size_t stopped = 0;
    for (std::size_t i = 0; i < pids.size(); ++i)
      stopped += !done[i] && signalled[i] && nodes[i].kill_signal == SIGSTOP &&
                 !nodes[i].restart_after_kill && nodes[i].continue_after.count() == 0;
    if (stopped == left)
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) ::kill(pids[i], SIGKILL);
    if (std::chrono::steady_clock::now() > deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
        results[i].timed_out = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    results[i].out = read_text(outs[i]);
    results[i].err = read_text(errs[i]);
  }
  return results;
}

/// Requires every node to have exited 0 in time; prints each node's stderr otherwise.
inline void require_all_ok(const std::vector<NodeResult>& results) {
  for (std::size_t i = 0; i < results.size(); ++i) {
    INFO("node " << i << " stderr:\n" << results[i].err);
    REQUIRE_MESSAGE(!results[i].timed_out, "node " << i << " was killed at the deadline");
    REQUIRE(results[i].exit_code == 0);
  }
}

/// Requires node `killed` to have been SIGKILLed and every other node to have exited 0 in
/// time; prints each survivor's stderr otherwise.
inline void require_survivors_ok(const std::vector<NodeResult>& results, std::size_t killed) {
  CHECK(results.at(killed).exit_code == 128 + SIGKILL);
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (i == killed) continue;
    INFO("node " << i << " stderr:\n" << results[i].err);
    REQUIRE_MESSAGE(!results[i].timed_out, "node " << i << " was killed at the deadline");
    REQUIRE(results[i].exit_code == 0);
  }
}

/// Runs `nodes` with node 1 under --supervise, whose process an `exit:node=1:…` fault
/// kills once: requires that its second attempt rejoined the running job and that every
/// node ended well (their stderr printed otherwise).
inline std::vector<NodeResult> run_with_node1_rejoining(const TempDir& dir, std::vector<NodeRun> nodes) {
  nodes[1].args.push_back("--supervise");
  auto results = run_nodes(dir, nodes, 120);
  require_all_ok(results);
  INFO("node 1 stderr:\n" << results[1].err);
  REQUIRE(results[1].err.find("starting attempt 2 of 4 from the running job, which it rejoins") !=
          std::string::npos);
  return results;
}

/// The rows of `event` ("replan", "joined", …) in a run's metrics.jsonl, in order.
inline std::vector<nlohmann::json> event_rows(const fs::path& run, const std::string& event) {
  std::vector<nlohmann::json> rows;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.value("event", "") == event) rows.push_back(row);
  return rows;
}

/// The `recovery` rows of a run's metrics.jsonl, in order.
inline std::vector<nlohmann::json> recovery_rows(const fs::path& run) { return event_rows(run, "recovery"); }

/// Checks that every step's loss in `run`'s metrics.jsonl is `reference`'s, bit for bit (a
/// step replayed after a shrink is logged twice, with the same loss), and that all `steps`
/// steps were logged: no micro-batch was skipped or seen twice.
inline void check_losses_match(const fs::path& run, const fs::path& reference, int steps) {
  std::map<int, double> want_loss;
  for (auto& row : read_jsonl(reference / "metrics.jsonl"))
    if (!row.contains("event") && row.contains("loss")) want_loss[row["step"].get<int>()] = row["loss"].get<double>();
  std::set<int> logged;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (!row.contains("event") && row.contains("loss")) {
      const int step = row["step"].get<int>();
      logged.insert(step);
      CHECK_MESSAGE(row["loss"].get<double>() == want_loss.at(step), "step " << step << "'s loss differs");
    }
  CHECK(logged.size() == static_cast<std::size_t>(steps));
}

/// The step after which the `event` row (the first) was logged: the boundary where the
/// run then stood (one more than the last step row before it); -1 when there is none.
inline int boundary_of_event(const fs::path& run, const std::string& event) {
  int last_step = -1;
  for (auto& row : read_jsonl(run / "metrics.jsonl")) {
    if (row.value("event", "") == event) return last_step + 1;
    if (!row.contains("event") && row.contains("loss")) last_step = row["step"].get<int>();
  }
  return -1;
}

/// A replan row's "partition" (blocks per stage, 0.5 for half a block) in half blocks, as a
/// manifest's partition_halves holds it.
inline std::vector<std::int64_t> partition_halves(const nlohmann::json& partition) {
  std::vector<std::int64_t> halves;
  for (const auto& blocks : partition) halves.push_back(static_cast<std::int64_t>(blocks.get<double>() * 2));
  return halves;
}

/// Every checkpoint folder of `run` (under its checkpoints/) holds a manifest and
/// verifies whole (sizes, sha256, the partition against the shards): their manifests, by
/// step. A folder without a manifest fails the test: no write may be left half done.
inline std::map<int, checkpoint::Manifest> verified_checkpoints(const fs::path& run) {
  std::map<int, checkpoint::Manifest> out;
  auto& disk = checkpoint::posix_filesystem();
  for (const auto& folder : checkpoint::list_checkpoints(disk, (run / "checkpoints").string())) {
    INFO(folder.path);
    CHECK(folder.complete);
    if (folder.complete) out[static_cast<int>(folder.step)] = checkpoint::verify_checkpoint(disk, folder.path);
  }
  return out;
}

/// The small job of these tests: the tiny config, 4 stages, 5 steps, no intermediate eval.
inline std::vector<std::string> tiny_job(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"train", "configs/tiny.yaml", "--set", "pipeline.stages=4",
                             "--set", "train.steps=5", "--set", "train.eval_every=0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

/// A step in [lo, hi] at which a test kills a node, drawn from a seed it prints
/// (CONVEYOR_TEST_SEED=<printed seed> replays it).
struct KillStep {
  std::uint32_t seed = 0;
  int step = 0;
};
inline KillStep random_kill_step(int lo, int hi) {
  const char* given = std::getenv("CONVEYOR_TEST_SEED");
  const auto seed = given ? static_cast<std::uint32_t>(std::stoul(given)) : std::random_device{}();
  std::mt19937 random(seed);
  const KillStep k{seed, std::uniform_int_distribution<int>(lo, hi)(random)};
  MESSAGE("seed " << k.seed << ": the node is killed once node 0 reports step " << k.step << " or later");
  return k;
}

/// The elastic tests' job (issue 44): tiny_job on 3 stages, one per node of 3, for `steps`
/// steps, then `extra`.
inline std::vector<std::string> three_stage_job(int steps, const std::vector<std::string>& extra = {}) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(steps), "--set", "rendezvous.timeout_s=20", "--set",
                        "pipeline.stages=3"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

/// The weights `job_args` (a job as tiny_job gives it, "train" first) end with in one
/// process, run into dir/one once per test binary and job: the reference a job over
/// processes must end with bit for bit.
inline const std::string& one_process_weights(const TempDir& dir, std::vector<std::string> job_args) {
  static std::map<std::vector<std::string>, std::string> done;
  auto& weights = done[job_args];
  if (weights.empty()) {
    job_args.erase(job_args.begin());  // train_ok adds "train"
    job_args.insert(job_args.end(), {"--out", dir / "one"});
    train_ok(job_args, 120);
    weights = read_text(dir.path() / "one" / "weights.safetensors");
  }
  return weights;
}

/// The weights `job_args` (tiny_job's form) end with in one process resumed from the
/// checkpoint `from`, run into dir/one-resumed.
inline std::string resumed_in_one_process(const TempDir& dir, std::vector<std::string> job_args,
                                          const std::string& from) {
  job_args.erase(job_args.begin());  // train_ok adds "train"
  job_args.insert(job_args.end(), {"--resume", from, "--out", dir / "one-resumed"});
  train_ok(job_args, 120);
  return read_text(dir.path() / "one-resumed" / "weights.safetensors");
}

/// How many shards run/checkpoints/step-N holds, once verified whole (sha256 of each).
inline std::size_t verified_shards(const fs::path& run, int step) {
  const auto dir = run / "checkpoints" / checkpoint::step_dir_name(step);
  INFO(dir.string());
  return checkpoint::verify_checkpoint(checkpoint::posix_filesystem(), dir.string()).shards.size();
}

/// `count` nodes of one job over loopback: each runs `args` with its launch flags (one
/// fresh rendezvous port) and --out `out`, CONVEYOR_TOKEN `token` in its environment.
inline std::vector<NodeRun> job_on_nodes(int count, const std::vector<std::string>& args,
                                         const fs::path& out, const std::string& token) {
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < count; ++n) {
    auto node_args = args;
    node_args.insert(node_args.end(), {"--nnodes", std::to_string(count), "--node-rank",
                                       std::to_string(n), "--rdzv", rdzv, "--out", out.string()});
    nodes.push_back(NodeRun{node_args, {{"CONVEYOR_TOKEN", token}}, {}});
  }
  return nodes;
}

/// `node` (node rank `rank`) SIGKILLed once node 0 reports step `step`, and started again
/// once node 0 logged the shrink without it: it joins the shrunk job.
inline void restart_after_shrink(NodeRun& node, int rank, int step) {
  node.kill_at_node0_step = step;
  node.restart_after_kill = true;
  node.restart_when_node0_says = "replan: node " + std::to_string(rank) + " lost for good";
}

/// The run in `run` ended with `want`'s weights, bit for bit; `seed` replays the faults.
inline void check_final_weights(const std::string& want, const fs::path& run, std::uint32_t seed) {
  const std::string got = read_text(run / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the run without the faults (seed " << seed << ")");
}

}  // namespace conveyor::testing
