#include "apps/watch/run_folder.hpp"

#include <fstream>
#include <sstream>
#include <system_error>

#include "kernels/common/error.hpp"

namespace conveyor::watch {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfig = "config.yaml";
constexpr const char* kPlan = "plan.json";
constexpr const char* kMetrics = "metrics.jsonl";

std::optional<std::string> read_whole(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;  // not written yet
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

RunFolder::RunFolder(fs::path dir) : dir_(std::move(dir)), metrics_(dir_ / kMetrics) {
  // "runs/r/" names the run "r" as "runs/r" does.
  const fs::path clean = dir_.lexically_normal();
  job_.run_name = (clean.has_filename() ? clean.filename() : clean.parent_path().filename()).string();
  status_.run_name = job_.run_name;
}

void RunFolder::read_job_files() {
  if (!have_config_)
    if (auto text = read_whole(dir_ / kConfig)) {
      apply_config(job_, *text);
      have_config_ = true;
    }
  if (!have_plan_)
    if (auto text = read_whole(dir_ / kPlan)) {
      const auto plan = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (plan.is_discarded() || !plan.is_object())
        throw InputError((dir_ / kPlan).string() + ": is not a JSON object (not a run folder's plan.json?)");
      apply_plan(job_, plan);
      have_plan_ = true;
    }
}

void RunFolder::refresh() {
  const bool had_config = have_config_, had_plan = have_plan_;
  read_job_files();
  const bool job_changed = had_config != have_config_ || had_plan != have_plan_;
  auto fresh = metrics_.read();
  // Rows read before the job's files came (or before a rewrite) are applied again over
  // them: the plan's stages get the busy shares of every row.
  if (fresh.restarted || (job_changed && status_.rows > 0)) {
    metrics_ = JsonlTail(metrics_.path());
    fresh = metrics_.read();
    status_ = job_;
  } else if (job_changed) {
    status_ = job_;
  }
  // Everything written so far, a bounded chunk at a time.
  for (;;) {
    for (const auto& line : fresh.lines) {
      if (line.empty()) continue;
      const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (row.is_discarded())
        note_unreadable_row(status_);
      else
        apply_row(status_, row);
    }
    if (!fresh.more) break;
    fresh = metrics_.read();
    if (fresh.restarted) status_ = job_;  // rewritten meanwhile: from its start again
  }
}

void check_run_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError("RUN_DIR " + dir.string() + ": " + (fs::exists(dir, ec) ? "is not a folder" : "does not exist"));
  for (const char* name : {kConfig, kPlan, kMetrics})
    if (fs::exists(dir / name, ec)) return;
  throw InputError("RUN_DIR " + dir.string() + ": holds no config.yaml, plan.json or metrics.jsonl (not a run folder)");
}

}  // namespace conveyor::watch
