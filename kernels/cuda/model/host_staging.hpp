#pragma once
// Uploads of small host tensors (token ids, targets) through reused pinned buffers, so the
// copy is truly asynchronous: from pageable memory the driver may synchronise with the
// stream before staging, which would stall the stage's thread behind queued work.
//
// A buffer is reused once the copy that last read it has completed (an event per buffer);
// when every buffer is still in flight a new one is made, so the pool grows to the number
// of uploads the stream lags behind and no further.
// Thread-safety: none; one owner thread.
#include <cuda_runtime_api.h>

#include <string_view>
#include <vector>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class HostStaging {
 public:
  /// Copies are queued on `stream` of `device` (not owned).
  HostStaging(cudaStream_t stream, int device);
  /// Waits for the copies still reading the pinned buffers.
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  /// A device copy of the host tensor `src` (same shape and dtype), allocated and filled in
  /// stream order. `src` may be reused as soon as this returns.
  Tensor upload(const Tensor& src, std::string_view label);

 private:
  struct Slot {
    Tensor pinned;      // page-locked bytes (typed i32 only to have a shape)
    cudaEvent_t done;   // recorded after the copy that reads `pinned`
  };
  cudaStream_t stream_;
  int device_;
  std::vector<Slot> slots_;
};

}  // namespace conveyor
