#include "kernels/cuda/model/loss_readback.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"

namespace conveyor {

std::shared_ptr<LossReadback> LossReadback::create(int device, int slots) {
  return std::shared_ptr<LossReadback>(new LossReadback(device, slots));
}

LossReadback::LossReadback(int device, int slots)
    : device_(device), written_(static_cast<std::size_t>(std::max(slots, 0)), nullptr),
      in_use_(written_.size(), false) {
  if (slots < 0)
    throw std::invalid_argument("LossReadback: " + std::to_string(slots) + " slots (need >= 0)");
  DeviceGuard guard(device_);
  host_ = zeros_pinned({slots + 1});
  void* alias = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&alias, host_.raw(), 0));
  device_base_ = static_cast<float*>(alias);
  for (auto& e : written_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

// Pending events are released once they complete (cudaEventDestroy's contract); no
// function that could wait on them is left (each holds this pool).
LossReadback::~LossReadback() {
  DeviceGuard guard(device_);
  for (auto e : written_) (void)cudaEventDestroy(e);
}

std::optional<int> LossReadback::acquire() {
  for (std::size_t i = 0; i < in_use_.size(); ++i)
    if (!in_use_[i]) {
      in_use_[i] = true;
      return static_cast<int>(i);
    }
  return std::nullopt;
}

double LossReadback::read_now(cudaStream_t stream) const {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<double>(static_cast<const float*>(host_.raw())[in_use_.size()]);
}

std::function<double()> LossReadback::pending(int slot, cudaStream_t stream) {
  CUDA_CHECK(cudaEventRecord(written_.at(static_cast<std::size_t>(slot)), stream));
  // Frees the slot when the last copy of the function goes, called or not.
  struct Hold {
    std::shared_ptr<LossReadback> pool;
    int slot;
    ~Hold() { pool->release(slot); }
  };
  auto hold = std::make_shared<Hold>(shared_from_this(), slot);  // no temporary Hold
  return [hold]() -> double {
    LossReadback& pool = *hold->pool;
    CUDA_CHECK(cudaEventSynchronize(pool.written_[static_cast<std::size_t>(hold->slot)]));
    return static_cast<double>(static_cast<const float*>(pool.host_.raw())[hold->slot]);
  };
}

}  // namespace conveyor
