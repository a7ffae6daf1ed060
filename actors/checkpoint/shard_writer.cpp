#include "actors/checkpoint/shard_writer.hpp"

#include "actors/checkpoint/atomic_file.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/sha256.hpp"

namespace conveyor::checkpoint {

std::string encode_shard_header(const std::vector<NamedTensor>& tensors) {
  return encode_safetensors_header(tensors);
}

ShardEntry write_shard(Filesystem& fs, const std::string& dir, int stage,
                       const std::vector<NamedTensor>& tensors) {
  return write_shard_to(fs, dir + "/" + shard_file_name(stage), stage, tensors);
}

ShardEntry write_shard_to(Filesystem& fs, const std::string& path, int stage,
                          const std::vector<NamedTensor>& tensors) {
  const std::string header = encode_shard_header(tensors);
  ShardEntry entry;
  entry.file = shard_file_name(stage);
  entry.stage = stage;
  for (const auto& t : tensors) entry.tensors.push_back(t.name);
  Sha256 sha;
  entry.bytes = write_file_atomically(fs, path, [&](const ByteSink& sink) {
    auto emit = [&](const void* data, std::size_t bytes) {
      sha.update(data, bytes);
      sink(data, bytes);
    };
    emit(header.data(), header.size());
    for (const auto& t : tensors) emit(t.tensor.raw(), t.tensor.bytes());
  });
  entry.sha256 = sha.hex_digest();
  return entry;
}

}  // namespace conveyor::checkpoint
