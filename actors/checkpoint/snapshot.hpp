#pragma once
// What a checkpoint write takes: host copies of every stage's tensors plus the run's
// state. A Snapshot owns its tensors' bytes (take them with Tensor::clone() or a
// device-to-host copy): the step loop goes on updating its own parameters while the
// writer thread reads the snapshot. A shard may instead come as a producer of its tensors
// (an in-memory snapshot still in a GPU's flat layout): the writer runs it on its own
// thread, so that converting never holds up the step loop. Or it may be written already
// by the process that holds it (checkpoint.writers: every_node, staged_shards.hpp): the
// writer then only waits for it and moves it into place.
#include <functional>
#include <string>
#include <vector>

#include "actors/checkpoint/manifest.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor::checkpoint {

class Filesystem;  // filesystem.hpp

struct StageShard {
  int stage = 0;
  std::vector<NamedTensor> tensors;  // global names (see tensor_names.hpp), host tensors
  /// When set, produces `tensors` (materialize() runs it once and clears it).
  std::function<std::vector<NamedTensor>()> produce;
  /// When set, the shard is written elsewhere: place(fs, step_dir) waits for it, moves it
  /// into `step_dir` and returns its manifest entry (`tensors` and `produce` unused).
  std::function<ShardEntry(Filesystem&, const std::string& step_dir)> place;
};

struct Snapshot {
  /// Everything but `shards`, which the writer fills from what it wrote.
  Manifest manifest;
  std::vector<StageShard> shards;

  /// Runs every shard's producer (on the caller's thread). Throws what a producer throws.
  void materialize() {
    for (auto& s : shards)
      if (s.produce) {
        s.tensors = s.produce();
        s.produce = nullptr;
      }
  }

  /// Bytes of tensor data, for logs and queue accounting (0 for shards not produced yet).
  std::uint64_t tensor_bytes() const {
    std::uint64_t n = 0;
    for (const auto& s : shards)
      for (const auto& t : s.tensors) n += t.tensor.bytes();
    return n;
  }
};

}  // namespace conveyor::checkpoint
