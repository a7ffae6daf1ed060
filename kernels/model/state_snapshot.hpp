#pragma once
// A stage model's training state kept in host memory for a possible restore (in-memory
// snapshots for stage restarts and rollbacks, actors/fault/snapshot_store.hpp), in whatever
// layout is cheapest for the model that took it: a GPU model copies its flat device buffers
// to pinned host memory in the background (kernels/cuda/model/cuda_state_snapshot.hpp), a
// CPU model clones its tensors. tensors() converts to the named f32 tensors of
// StageModel::capture_state() when another consumer needs them (a checkpoint, a model of
// another kind); a model of the same kind and layout restores from its own form directly.
//
// A snapshot is immutable once taken and outlives the model that took it (the model may
// be a crashed stage's): it owns everything it refers to.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/io/safetensors.hpp"

namespace conveyor {

class StateSnapshot {
 public:
  virtual ~StateSnapshot() = default;
  /// The state as capture_state() names it: every parameter, then opt.m / opt.v (f32,
  /// host). May wait for the copy that fills the snapshot to finish.
  virtual std::vector<NamedTensor> tensors() const = 0;
  /// AdamW's step count when it was taken.
  virtual std::int64_t optimizer_steps() const = 0;
  /// Host bytes held.
  virtual std::size_t bytes() const = 0;
};

/// A snapshot that is named host tensors already (what capture_state() returned).
class TensorStateSnapshot final : public StateSnapshot {
 public:
  TensorStateSnapshot(std::vector<NamedTensor> tensors, std::int64_t optimizer_steps)
      : tensors_(std::move(tensors)), optimizer_steps_(optimizer_steps) {}
  std::vector<NamedTensor> tensors() const override { return tensors_; }
  std::int64_t optimizer_steps() const override { return optimizer_steps_; }
  std::size_t bytes() const override {
    std::size_t n = 0;
    for (const auto& t : tensors_) n += t.tensor.bytes();
    return n;
  }

 private:
  std::vector<NamedTensor> tensors_;  // handles: never written once here
  std::int64_t optimizer_steps_;
};

}  // namespace conveyor
