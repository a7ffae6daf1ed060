#include "apps/train/metrics_log.hpp"

#include "apps/train/plan_json.hpp"
#include "apps/train/run_dir.hpp"

#include <algorithm>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

namespace conveyor {

MetricsLog::MetricsLog(const std::filesystem::path& file, const sched::Schedule& schedule,
                       Progress& progress, double straggler_factor, int straggler_steps)
    : path_(file),
      file_(std::fopen(file.c_str(), "a+")),  // a+: drop_partial_row reads the tail
      schedule_(schedule),
      progress_(progress),
      durations_(schedule),
      stragglers_(straggler_factor, straggler_steps) {
  if (!file_)
    throw std::runtime_error(fmt::format("{}: cannot open: {}", path_.string(),
                                         std::strerror(errno)));
  if (const auto dropped = drop_partial_row())
    fmt::print(stderr, "conveyor train: {}: dropped a partial last row ({} bytes) an earlier run left\n",
               path_.string(), dropped);
}

MetricsLog::~MetricsLog() { std::fclose(file_); }

std::int64_t MetricsLog::drop_partial_row() {
  // A run that died mid-write (a full disk, SIGKILL) can leave a row without its newline:
  // a resumed run appending after it would join the two into one line that is not JSON.
  const int fd = ::fileno(file_);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) return 0;
  // Back from the end in blocks to the last newline (0: the file holds no whole row).
  off_t end = st.st_size;
  char block[4096];
  for (bool found = false; end > 0 && !found;) {
    const off_t from = std::max<off_t>(0, end - static_cast<off_t>(sizeof block));
    const ssize_t n = ::pread(fd, block, static_cast<std::size_t>(end - from), from);
    if (n != end - from) return 0;  // unreadable: leave it as it is
    while (end > from && block[end - from - 1] != '\n') --end;
    found = end > from;
  }
  if (end == st.st_size) return 0;
  if (::ftruncate(fd, end) != 0)
    throw std::runtime_error(fmt::format("{}: cannot drop the partial last row: {}", path_.string(),
                                         std::strerror(errno)));
  return st.st_size - end;
}

void MetricsLog::append(const nlohmann::json& row) {
  // Replace: a path that is not UTF-8 (--out, data.path) must not fail the row.
  const std::string line = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    const int error = errno;
    std::clearerr(file_);
    // No half row left behind: the file ends at its last whole row again.
    const bool dropped = [&] {
      try {
        (void)drop_partial_row();
        return true;
      } catch (const std::runtime_error&) {
        return false;
      }
    }();
    throw std::runtime_error(fmt::format("{}: write failed: {}{}", path_.string(), std::strerror(error),
                                         dropped ? "" : " (its last row may be partial)"));
  }
}

void MetricsLog::on_step(const StepMetrics& m, const std::vector<StageReport>& reports) {
  nlohmann::json row{{"step", m.step},
                     {"loss", m.loss},
                     {"lr", m.lr},
                     {"grad_norm", m.grad_norm},
                     {"tokens_per_s", m.tokens_per_s},
                     {"step_ms", m.step_ms},
                     {"bubble", m.bubble},
                     {"stage_busy_ms", m.stage_busy_ms}};
  if (m.allreduce_ms > 0.0) {  // data parallelism: the step's gradient averaging
    row["allreduce_ms"] = m.allreduce_ms;
    row["allreduce_exposed_ms"] = m.allreduce_exposed_ms;
  }
  if (m.allgather_ms > 0.0) row["allgather_ms"] = m.allgather_ms;  // optim.shard_state
  append(row);
  if (m.skipped) {
    append({{"event", "nan"}, {"step", m.step}, {"action", "skip"}, {"stages", m.nonfinite_ranks}});
    progress_.note(fmt::format("step {}: loss or gradients not finite (on stage(s) {}); "
                               "update skipped (fault.on_nan: skip)",
                               m.step, fmt::join(m.nonfinite_ranks, ", ")));
  }
  for (const auto& s : stragglers_.observe(m)) {
    append({{"event", "straggler"},
            {"stage", s.stage},
            {"step", s.step},
            {"busy_ms", s.busy_ms},
            {"peer_median_ms", s.peer_median_ms},
            {"ratio", s.ratio},
            {"baseline_ratio", s.baseline_ratio},
            {"steps", s.steps}});
    progress_.note(fmt::format(
        "stage {} is a straggler: {} steps at {:.1f}x the median of the other stages' busy time "
        "({:.1f} ms vs {:.1f} ms; {:.1f}x in its first steps)",
        s.stage, s.steps, s.ratio, s.busy_ms, s.peer_median_ms, s.baseline_ratio));
  }
  if (m.step >= 2) {  // the first steps pay for allocation and page faults
    tokens_per_s_sum_ += m.tokens_per_s;
    bubble_sum_ += m.bubble;
    ++counted_;
    durations_.add(reports);
  }
  progress_.step(m.step, m.loss, m.tokens_per_s);
}

void MetricsLog::on_eval(const EvalMetrics& m) {
  append({{"event", "eval"}, {"after_step", m.step}, {"val_loss", m.val_loss}});
  progress_.note(fmt::format("eval after step {}: val_loss {:.4f}", m.step + 1, m.val_loss));
}

void MetricsLog::on_recovery(const RecoveryEvent& e) {
  append({{"event", "recovery"},
          {"fault", e.fault},
          {"stage", e.stages.empty() ? -1 : e.stages.front()},
          {"stages", e.stages},
          {"step", e.step},
          {"restored_step", e.restored_step},
          {"respawned", e.respawned},
          {"restored_from", e.restored_from},
          {"recovery_ms", e.recovery_ms},
          {"restarts_in_window", e.restarts_in_window},
          {"reason", e.reason}});
  // A lost process's stages come back with its replacement; stages of this process that
  // failed with it (their transfers broke) are respawned here.
  std::vector<int> rejoined, respawned;
  for (int r : e.respawned)
    (e.fault == "node" && std::ranges::find(e.stages, r) != e.stages.end() ? rejoined : respawned)
        .push_back(r);
  std::string replaced;
  if (!rejoined.empty())
    replaced = fmt::format("stage(s) {} rejoined with the replacement process", fmt::join(rejoined, ", "));
  if (!respawned.empty())
    replaced += fmt::format("{}stage(s) {} respawned", replaced.empty() ? "" : ", ",
                            fmt::join(respawned, ", "));
  if (replaced.empty()) replaced = "no stage respawned";
  // With replicas the state may come from a healthy replica instead of the snapshot.
  if (e.restored_from == "kept")
    replaced += " (every stage kept its state)";
  else if (e.restored_from.starts_with("checkpoint "))  // a rejoin without buddy copies
    replaced += " (every stage loaded " + e.restored_from + ")";
  else if (e.restored_from != "snapshot")
    replaced += " (its state copied from " + e.restored_from + ")";
  progress_.note(fmt::format(
      "recovered from a {} at step {} in {:.0f} ms: {}; {}, every stage back at step {}, replaying",
      e.fault == "node" ? "lost process" : e.fault, e.step, e.recovery_ms, e.reason, replaced,
      e.restored_step));
}

void MetricsLog::on_node_lost(int node, const std::string& why, double wait_s) {
  append({{"event", "node_lost"}, {"node", node}, {"reason", why}, {"rejoin_timeout_s", wait_s}});
  progress_.note(fmt::format(
      "{}; waiting up to {:.0f} s (fault.rejoin_timeout_s) for node {} to be started again with "
      "the same command: it rejoins, and the run goes on from the newest snapshot node 0 "
      "holds of every stage (without buddy copies: the newest checkpoint)",
      why, wait_s, node));
}

void MetricsLog::on_replan(const ReplanEvent& e, const JobPlan& plan, const std::vector<int>& node_of_rank,
                           int generation) {
  append(replan_row(e));
  progress_.note(replan_log_line(e));
  progress_.layout(live_layout_text(static_cast<int>(e.to.nodes.size()), e.to.replicas, e.to.stages));
  auto json = plan_json(plan, node_of_rank);
  json["generation"] = generation;
  write_file_atomically(path_.parent_path() / "plan.json", json.dump(2) + "\n");
  if (on_relayout_) on_relayout_(plan, node_of_rank, generation);
}

void MetricsLog::checkpoint_written(const checkpoint::WriteResult& w) {
  append({{"event", "checkpoint"}, {"step", w.step}, {"seconds", w.seconds}, {"bytes", w.bytes}, {"path", w.path}});
}

void MetricsLog::event(const nlohmann::json& row) { append(row); }

std::optional<double> MetricsLog::mean_tokens_per_s() const {
  if (counted_ == 0) return std::nullopt;
  return tokens_per_s_sum_ / static_cast<double>(counted_);
}
std::optional<double> MetricsLog::mean_bubble() const {
  if (counted_ == 0) return std::nullopt;
  return bubble_sum_ / static_cast<double>(counted_);
}

}  // namespace conveyor

namespace conveyor {

double MetricsLog::simulated_bubble() const {
  if (durations_.steps() == 0) return 0.0;
  const auto sim = sched::simulate(schedule_, durations_.costs());
  return sim.ok() ? sim.bubble : 0.0;
}

}  // namespace conveyor
