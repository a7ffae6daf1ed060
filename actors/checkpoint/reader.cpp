#include "actors/checkpoint/reader.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/partition_check.hpp"
#include "actors/checkpoint/sha256.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor::checkpoint {

Manifest read_manifest(Filesystem& fs, const std::string& step_dir) {
  const std::string path = step_dir + "/" + kManifestFile;
  if (!fs.exists(path))
    throw CheckpointError(step_dir, std::string("incomplete checkpoint: no ") + kManifestFile +
                                        " (its write did not finish)");
  // A manifest lists one entry per shard and its config: kilobytes.
  constexpr std::uint64_t kMaxManifestBytes = 64ull << 20;
  return parse_manifest(read_whole_file(fs, path, kMaxManifestBytes), path);
}

namespace {

// Each shard's digest, shards hashed side by side (a checkpoint of P stages is P files of
// gigabytes; one core hashes about 1.5 GB/s with SHA extensions). The first failure in
// shard order is rethrown, so the error does not depend on which thread finished first.
std::vector<FileDigest> digests_of(Filesystem& fs, const std::string& step_dir, const Manifest& m) {
  const std::size_t n = m.shards.size();
  std::vector<FileDigest> out(n);
  std::vector<std::exception_ptr> failed(n);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        out[i] = sha256_of_file(*fs.open(step_dir + "/" + m.shards[i].file));
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
  return out;
}

// A shard that verification passed and that still cannot be read (a file changed since,
// or a writer's bug): a CheckpointError naming it.
template <class Read>
auto read_shard(const std::string& path, Read read) {
  try {
    return read();
  } catch (const std::exception& e) {
    throw CheckpointError(path, std::string("shard cannot be read: ") + e.what());
  }
}

}  // namespace

Manifest verify_checkpoint(Filesystem& fs, const std::string& step_dir) {
  Manifest m = read_manifest(fs, step_dir);
  // Before any shard is hashed: the manifest must describe its own shards.
  check_partition_against_shards(m, step_dir + "/" + kManifestFile);
  const auto wrong_size = [&](const std::string& path, const ShardEntry& shard, std::uint64_t size) {
    return CheckpointError(path, "shard is " + std::to_string(size) + " bytes, " + kManifestFile + " says " +
                                     std::to_string(shard.bytes) + " (truncated or overwritten)");
  };
  // The sizes first, all of them: a shard that is not the manifest's size is not hashed
  // (200 GB of sparse file would take hours to say so).
  for (const auto& shard : m.shards) {
    const std::string path = step_dir + "/" + shard.file;
    if (!fs.exists(path)) throw CheckpointError(path, std::string("shard listed in ") + kManifestFile + " is missing");
    if (const std::uint64_t size = fs.open(path)->size(); size != shard.bytes) throw wrong_size(path, shard, size);
  }
  const auto digests = digests_of(fs, step_dir, m);
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    const auto& shard = m.shards[i];
    const std::string path = step_dir + "/" + shard.file;
    // The bytes hashed count again: the file may have changed since its size was read.
    if (digests[i].bytes != shard.bytes) throw wrong_size(path, shard, digests[i].bytes);
    if (digests[i].sha256 != shard.sha256)
      throw CheckpointError(path, "shard's sha256 is " + digests[i].sha256 + ", " + kManifestFile + " says " +
                                      shard.sha256 + " (corrupt)");
  }
  return m;
}

CheckpointIndex index_checkpoint(const std::string& step_dir, const Manifest& manifest) {
  CheckpointIndex out;
  for (std::size_t i = 0; i < manifest.shards.size(); ++i) {
    const auto& shard = manifest.shards[i];
    const std::string path = step_dir + "/" + shard.file;
    const auto header = read_shard(path, [&] { return read_safetensors_index(path); });
    std::vector<std::string> names;
    for (const auto& t : header.tensors) names.push_back(t.name);
    if (names != shard.tensors)
      throw CheckpointError(path, "shard holds " + std::to_string(names.size()) + " tensors that differ from the " +
                                      std::to_string(shard.tensors.size()) + " " + kManifestFile + " lists");
    for (const auto& t : header.tensors) {
      out.tensors.emplace(t.name, TensorSpec{t.name, t.shape, t.dtype});
      out.shard_of.emplace(t.name, i);
    }
  }
  return out;
}

std::map<std::string, Tensor> load_tensors(const std::string& step_dir, const Manifest& manifest,
                                           const CheckpointIndex& index, const std::set<std::string>& names) {
  std::map<std::size_t, std::set<std::string>> by_shard;
  for (const auto& name : names) by_shard[index.shard_of.at(name)].insert(name);
  std::map<std::string, Tensor> out;
  for (const auto& [shard, wanted] : by_shard) {
    const std::string path = step_dir + "/" + manifest.shards.at(shard).file;
    for (auto& t : read_shard(path, [&] { return read_safetensors_subset(path, wanted); }))
      out.emplace(std::move(t.name), std::move(t.tensor));
  }
  return out;
}

LoadedCheckpoint load_checkpoint(Filesystem& fs, const std::string& step_dir) {
  LoadedCheckpoint out;
  out.path = step_dir;
  out.manifest = verify_checkpoint(fs, step_dir);
  const CheckpointIndex index = index_checkpoint(step_dir, out.manifest);
  std::set<std::string> all;
  for (const auto& [name, spec] : index.tensors) all.insert(name);
  out.tensors = load_tensors(step_dir, out.manifest, index, all);
  return out;
}

}  // namespace conveyor::checkpoint
