#include "kernels/cuda/model/cuda_state_snapshot.hpp"

#include <cstring>

#include "kernels/tensor/bf16.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/model/state_names.hpp"

namespace conveyor {

Tensor flat_piece(const void* block, bool f32, const FlatLayout::Entry& e) {
  Tensor t = Tensor::zeros(e.shape);
  float* dst = t.f32();
  const auto off = static_cast<std::size_t>(e.offset), n = static_cast<std::size_t>(e.numel);
  if (f32) {
    std::memcpy(dst, static_cast<const float*>(block) + off, n * sizeof(float));
  } else {
    const auto* src = static_cast<const std::uint16_t*>(block) + off;
    for (std::size_t k = 0; k < n; ++k) dst[k] = bf16_bits_to_float(src[k]);
  }
  return t;
}

bool FlatLayout::same_as(const FlatLayout& o) const {
  if (total != o.total || f32 != o.f32 || entries.size() != o.entries.size()) return false;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].name != o.entries[i].name || entries[i].offset != o.entries[i].offset ||
        entries[i].numel != o.entries[i].numel)
      return false;
  return true;
}

CudaStateSnapshot::CudaStateSnapshot(std::shared_ptr<const FlatLayout> layout,
                                     std::shared_ptr<Storage> values, std::shared_ptr<Storage> m,
                                     std::shared_ptr<Storage> v, std::int64_t optimizer_steps,
                                     int device, cudaEvent_t done)
    : layout_(std::move(layout)),
      values_(std::move(values)),
      m_(std::move(m)),
      v_(std::move(v)),
      optimizer_steps_(optimizer_steps),
      device_(device),
      done_(done) {}

CudaStateSnapshot::~CudaStateSnapshot() {
  // No throwing here (DeviceGuard checks): a failing runtime only leaks the event.
  int previous = 0;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device_);
  (void)cudaEventSynchronize(done_);  // a block must not be reused while it is written
  (void)cudaEventDestroy(done_);
  (void)cudaSetDevice(previous);
}

void CudaStateSnapshot::wait() const {
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaEventSynchronize(done_));
}

std::vector<NamedTensor> CudaStateSnapshot::tensors() const {
  wait();
  std::vector<NamedTensor> out;
  out.reserve(layout_->entries.size() * (has_moments() ? 3 : 1));
  for (const auto& e : layout_->entries) {
    out.push_back({e.name, flat_piece(values(), layout_->f32, e)});
    if (has_moments()) {
      out.push_back({opt_m_name(e.name), flat_piece(m(), layout_->f32, e)});
      out.push_back({opt_v_name(e.name), flat_piece(v(), layout_->f32, e)});
    }
  }
  return out;
}

std::size_t CudaStateSnapshot::bytes() const {
  return layout_->buffer_bytes() * (has_moments() ? 3 : 1);
}

}  // namespace conveyor
