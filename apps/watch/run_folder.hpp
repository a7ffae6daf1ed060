#pragma once
// A run folder read as it is written: config.yaml and plan.json once they exist (train
// writes them whole, atomically, before the first step), metrics.jsonl tailed row by row
// (jsonl_tail.hpp). Each refresh() applies what is new to the status; a metrics.jsonl
// that was rewritten from its start (a resumed run dropped a partial row) rebuilds the
// status from the whole file.
//
// Thread-safety: none; the server holds it under its own mutex (status_source.hpp).
#include <filesystem>

#include "apps/watch/jsonl_tail.hpp"
#include "apps/watch/run_status.hpp"

namespace conveyor::watch {

class RunFolder {
 public:
  /// REQUIRES: `dir` exists (check_run_folder); the files may come later.
  explicit RunFolder(std::filesystem::path dir);

  /// Reads what was written since the last call. Throws InputError naming the file when
  /// config.yaml or plan.json cannot be parsed, std::runtime_error when a file exists but
  /// cannot be read.
  void refresh();
  const RunStatus& status() const { return status_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  void read_job_files();
  std::filesystem::path dir_;
  JsonlTail metrics_;
  RunStatus status_;
  RunStatus job_;  // config.yaml and plan.json applied alone: where a rebuild starts
  bool have_config_ = false, have_plan_ = false;
};

/// InputError naming RUN_DIR and what is wrong unless `dir` is a folder that holds a
/// run's config.yaml, plan.json or metrics.jsonl (a run being started may lack some).
void check_run_folder(const std::filesystem::path& dir);

}  // namespace conveyor::watch
