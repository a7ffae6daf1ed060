#include "actors/checkpoint/resume.hpp"

#include <filesystem>
#include <optional>

#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "kernels/common/error.hpp"

namespace conveyor::checkpoint {
namespace {

// Newest first among complete checkpoints of `dir` with step <= max_step (if given).
ResumePoint newest_valid(Filesystem& fs, const std::string& dir, std::optional<std::int64_t> max_step,
                         const std::string& what, const std::string& flag) {
  std::vector<CheckpointFolder> all;
  try {
    all = list_checkpoints(fs, dir);
  } catch (const std::exception& e) {
    throw InputError(flag + ": " + e.what());
  }
  ResumePoint out;
  std::vector<std::string> incomplete;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (max_step && it->step > *max_step) continue;
    if (!it->complete) {
      incomplete.push_back(it->path);
      continue;
    }
    try {
      out.manifest = verify_checkpoint(fs, it->path);
    } catch (const std::exception& e) {
      out.skipped.push_back(e.what());
      continue;
    }
    if (out.manifest.step != it->step) {  // a folder renamed or a manifest copied by hand
      out.skipped.push_back(it->path + ": its manifest.json says step " + std::to_string(out.manifest.step) +
                            ", the folder's name step " + std::to_string(it->step));
      continue;
    }
    out.path = it->path;
    out.description = "resuming from " + out.path + " (step " + std::to_string(out.manifest.step) + ", " + what + ")";
    for (const auto& s : out.skipped)
      out.description += "\nskipped a newer checkpoint that failed verification: " + s;
    for (const auto& p : incomplete)
      out.description += "\nignored an incomplete checkpoint (no manifest.json): " + p;
    return out;
  }
  std::string message = flag + ": no usable checkpoint in " + dir;
  if (all.empty()) message += " (it holds no step-* folders)";
  for (const auto& s : out.skipped) message += "; failed verification: " + s;
  for (const auto& p : incomplete) message += "; incomplete (no manifest.json): " + p;
  throw InputError(message);
}

}  // namespace

ResumePoint resolve_resume(Filesystem& fs, const std::string& arg, const std::string& checkpoint_dir,
                           const std::string& flag) {
  if (arg == "latest") {
    if (!fs.is_dir(checkpoint_dir))
      throw InputError(flag + " latest: checkpoint.dir " + checkpoint_dir +
                       (fs.exists(checkpoint_dir) ? " is not a folder" : " does not exist"));
    return newest_valid(fs, checkpoint_dir, std::nullopt, "the newest under " + checkpoint_dir, flag);
  }
  std::string path = arg;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (!fs.is_dir(path))
    throw InputError(flag + " " + arg + ": " + (fs.exists(path) ? "not a folder" : "no such folder") +
                     " (expected 'latest', a checkpoint folder, or a run folder holding checkpoints/)");

  const std::filesystem::path p(path);
  const auto step = parse_step_dir_name(p.filename().string());
  if (step || fs.exists(path + "/" + kManifestFile)) {
    if (!step) {  // a checkpoint folder renamed by hand: it alone, no neighbours to fall back to
      ResumePoint out;
      try {
        out.manifest = verify_checkpoint(fs, path);
      } catch (const std::exception& e) {
        throw InputError(flag + ": " + e.what());
      }
      out.path = path;
      out.description = "resuming from " + path + " (step " + std::to_string(out.manifest.step) + ")";
      return out;
    }
    const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
    return newest_valid(fs, parent, *step, "as asked, or older if it fails verification", flag);
  }
  if (fs.is_dir(path + "/checkpoints"))
    return newest_valid(fs, path + "/checkpoints", std::nullopt, "the newest of run folder " + path, flag);
  for (const auto& e : fs.list(path))
    if (e.is_dir && parse_step_dir_name(e.name)) return newest_valid(fs, path, std::nullopt, "the newest under " + path, flag);
  throw InputError(flag + " " + arg + ": not a checkpoint (no " + kManifestFile +
                   "), not a run folder (no checkpoints/), and holds no step-* folders");
}

}  // namespace conveyor::checkpoint
