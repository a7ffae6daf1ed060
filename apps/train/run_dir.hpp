#pragma once
// The run folder: where `conveyor train` writes config.yaml, plan.json, metrics.jsonl
// and weights.safetensors. It is created only after every input has been validated, so a
// bad config leaves nothing behind.
#include <filesystem>
#include <optional>
#include <string>

namespace conveyor {

/// Where a run's checkpoints go: checkpoint.dir when set (`configured`), else
/// `run_dir`/checkpoints. The one place that default is written.
std::filesystem::path checkpoint_folder(const std::string& configured, const std::filesystem::path& run_dir);

/// runs/<UTC timestamp>[-N]: the default run folder, one that does not exist yet.
std::filesystem::path unused_run_dir();

/// `out` if given, else runs/<UTC timestamp>/. Throws InputError when `out` already
/// holds a run (a metrics.jsonl) or cannot be created. With `continuing` (a resumed run)
/// a folder holding a run is the one to continue: it is returned as it is, and the run
/// appends to its metrics.jsonl.
std::filesystem::path create_run_dir(const std::optional<std::string>& out,
                                     bool continuing = false);

/// The run folder of a run that has not started yet (create_run_dir's): when the start
/// fails before started() — a shared folder that is not shared, a trace file that cannot
/// be opened — a folder this process made is removed again with what was written into
/// it, so a failed start leaves nothing behind. A folder that existed is left as it is.
class UnstartedRunDir {
 public:
  UnstartedRunDir(const std::optional<std::string>& out, bool continuing);
  ~UnstartedRunDir();
  UnstartedRunDir(const UnstartedRunDir&) = delete;
  UnstartedRunDir& operator=(const UnstartedRunDir&) = delete;
  const std::filesystem::path& path() const { return dir_; }
  /// The run has begun (its metrics.jsonl exists): the folder is its record from now on.
  void started() { made_here_ = false; }

 private:
  std::filesystem::path dir_;
  bool made_here_ = false;
};

/// THROWS InputError when `dir` holds a run (a metrics.jsonl).
void refuse_held_run(const std::filesystem::path& dir);

/// THROWS InputError naming `what` when this process cannot write into `dir` (a
/// read-only mount, no permission).
void refuse_unwritable(const std::filesystem::path& dir, const std::string& what);

/// `path` absolute and normalised, as other processes of a job are told it (their working
/// directories may differ); as given when it cannot be made absolute.
std::string absolute_path(const std::string& path);

/// Writes a whole file atomically (temporary beside it, fsync, rename).
/// Throws std::runtime_error naming the file on failure.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace conveyor
