#include "actors/checkpoint/staged_shards.hpp"

#include <fmt/format.h>

#include <random>

#include "actors/checkpoint/atomic_file.hpp"
#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/shard_writer.hpp"

namespace conveyor::checkpoint {
namespace {

constexpr const char* kStagingRoot = ".incoming";

// The file that says node 0 prepared this attempt here.
std::string attempt_file(const std::string& staging, const std::string& token) {
  return staging + "/attempt-" + token;
}

std::string staged_name(const std::string& final_name, const std::string& token) {
  const auto dot = final_name.rfind('.');
  return final_name.substr(0, dot) + "." + token + final_name.substr(dot);
}

}  // namespace

std::string staging_dir(const std::string& checkpoint_dir, std::int64_t step) {
  return checkpoint_dir + "/" + kStagingRoot + "/" + step_dir_name(step);
}

std::string make_staging_token() {
  std::random_device entropy;
  const std::uint64_t bits = (std::uint64_t{entropy()} << 32) ^ entropy();
  return fmt::format("{:016x}", bits);
}

void prepare_staging(Filesystem& fs, const std::string& checkpoint_dir, std::int64_t step,
                     const std::string& token) {
  const std::string dir = staging_dir(checkpoint_dir, step);
  fs.make_dirs(dir);
  write_file_atomically(fs, attempt_file(dir, token), [&](const ByteSink& sink) { sink(token.data(), token.size()); });
  fs.sync_dir(dir);
}

ShardEntry write_staged_shard(Filesystem& fs, const std::string& staging, const std::string& token,
                              int stage, const std::vector<NamedTensor>& tensors) {
  if (!fs.exists(attempt_file(staging, token)))
    throw CheckpointError(staging, "node 0 prepared this folder for the checkpoint, but this node does not see "
                                   "it: checkpoint.writers every_node needs checkpoint.dir to be one folder that "
                                   "every node sees (a shared filesystem, the same path on every host)");
  // The entry (file name, sha256) is the one the manifest will hold.
  ShardEntry entry = write_shard_to(fs, staging + "/" + staged_name(shard_file_name(stage), token), stage, tensors);
  fs.sync_dir(staging);
  return entry;
}

void place_staged_shard(Filesystem& fs, const std::string& staging, const std::string& token,
                        const std::string& step_dir, const ShardEntry& entry) {
  const std::string from = staging + "/" + staged_name(entry.file, token);
  if (!fs.exists(from))
    throw CheckpointError(from, "missing, though the node that wrote it reported it written: is "
                                "checkpoint.dir one folder that every node sees?");
  fs.rename(from, step_dir + "/" + entry.file);
}

std::vector<std::string> remove_staging_before(Filesystem& fs, const std::string& checkpoint_dir,
                                               std::int64_t step, bool inclusive) {
  std::vector<std::string> warnings;
  const std::string root = checkpoint_dir + "/" + kStagingRoot;
  try {
    if (!fs.is_dir(root)) return warnings;
    for (const auto& e : fs.list(root)) {
      const auto s = parse_step_dir_name(e.name);
      if (!s || *s > step || (*s == step && !inclusive)) continue;
      try {
        fs.remove_all(root + "/" + e.name);
      } catch (const std::exception& x) {
        warnings.push_back(std::string("could not remove a staging folder: ") + x.what());
      }
    }
    if (fs.list(root).empty()) fs.remove_all(root);  // nothing on its way: no empty folder left
  } catch (const std::exception& x) {
    warnings.push_back(std::string("staging folders not cleaned: ") + x.what());
  }
  return warnings;
}

}  // namespace conveyor::checkpoint
