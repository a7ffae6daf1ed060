#pragma once
// A CUDA stage model's training state in pinned host memory, as its flat device buffers
// hold it (kernels/model/state_snapshot.hpp): the parameters (fp32 master, or the bf16
// values), then the two AdamW moments, one block each, copied by the copy engine on a side
// stream while the next step computes (ParamStore::snapshot). Restoring into a model of the
// same layout is three host-to-device copies; tensors() widens to the named f32 tensors
// of capture_state() for anything else (a checkpoint, a CPU model).
//
// The blocks are filled asynchronously: everything that reads them waits for `done` first
// (wait()). The snapshot owns its blocks and its event, so it outlives the model.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/model/state_snapshot.hpp"
#include "kernels/tensor/storage.hpp"

namespace conveyor {

/// Where each parameter lies in a stage's flat state buffers.
struct FlatLayout {
  struct Entry {
    std::string name;
    Shape shape;
    std::int64_t offset = 0, numel = 0;
  };
  std::vector<Entry> entries;  // parameter order
  std::int64_t total = 0;      // padded elements of every flat buffer
  bool f32 = true;             // the state buffers hold f32 (fp32 master recipe), else bf16

  std::size_t buffer_bytes() const {
    return static_cast<std::size_t>(total) * (f32 ? sizeof(float) : sizeof(std::uint16_t));
  }
  bool same_as(const FlatLayout& o) const;
};

/// One parameter's slice of a flat host block (f32, or bf16 bits when !f32) as a fresh f32
/// tensor of its shape; bf16 is widened, which is exact.
Tensor flat_piece(const void* block, bool f32, const FlatLayout::Entry& e);

class CudaStateSnapshot final : public StateSnapshot {
 public:
  /// `values`, `m`, `v`: pinned blocks of layout->buffer_bytes() being filled by copies
  /// that `done` (an event of `device`, owned from now on) follows; m and v null when the
  /// optimizer has not stepped yet.
  CudaStateSnapshot(std::shared_ptr<const FlatLayout> layout, std::shared_ptr<Storage> values,
                    std::shared_ptr<Storage> m, std::shared_ptr<Storage> v,
                    std::int64_t optimizer_steps, int device, cudaEvent_t done);
  ~CudaStateSnapshot() override;
  CudaStateSnapshot(const CudaStateSnapshot&) = delete;
  CudaStateSnapshot& operator=(const CudaStateSnapshot&) = delete;

  std::vector<NamedTensor> tensors() const override;
  std::int64_t optimizer_steps() const override { return optimizer_steps_; }
  std::size_t bytes() const override;

  /// Returns once the copies filling the blocks are complete.
  void wait() const;
  const FlatLayout& layout() const { return *layout_; }
  bool has_moments() const { return m_ != nullptr; }
  const void* values() const { return values_->data(); }
  const void* m() const { return m_->data(); }
  const void* v() const { return v_->data(); }

 private:
  std::shared_ptr<const FlatLayout> layout_;
  std::shared_ptr<Storage> values_, m_, v_;
  std::int64_t optimizer_steps_;
  int device_;
  cudaEvent_t done_;
};

}  // namespace conveyor
