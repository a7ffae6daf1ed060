#pragma once
// Storage on a CUDA device (from the caching allocator) and pinned host storage.
// A device Storage remembers the stream it was allocated on: when the last holder lets go
// the block returns to that stream's free list (see allocator.hpp for what must hold when
// the tensor was also used on other streams).
#include <cuda_runtime_api.h>

#include <memory>
#include <string_view>

#include "kernels/tensor/storage.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// Device memory of `bytes` bytes on cuda:`device`, not initialised.
std::shared_ptr<Storage> allocate_device(std::size_t bytes, int device, cudaStream_t stream,
                                         std::string_view label);

/// Page-locked host memory (cudaMallocHost), zero-filled; Device::cpu(). Not cached:
/// allocate pinned buffers once (staging, snapshots), not per step.
std::shared_ptr<Storage> allocate_pinned(std::size_t bytes);

/// True when `storage` was made by allocate_pinned().
bool is_pinned(const Storage& storage);

/// An uninitialised device tensor.
Tensor empty_cuda(Shape shape, DType dtype, int device, cudaStream_t stream,
                  std::string_view label);

/// A zero-filled device tensor (cudaMemsetAsync on `stream`).
Tensor zeros_cuda(Shape shape, DType dtype, int device, cudaStream_t stream,
                  std::string_view label);

/// A zero-filled pinned host tensor.
Tensor zeros_pinned(Shape shape, DType dtype = DType::f32);

// Ordering across streams and devices without a host sync. Every device storage carries
// one "ready" event (created lazily on the recording stream's device):
// - the producer calls record_ready(t, stream) after queuing its last write of t on
//   `stream` (a later record replaces the earlier one);
// - every consumer calls wait_ready(t, its_stream) before queuing work that reads t; the
//   wait is a cudaStreamWaitEvent, so it also orders work across devices.
// Host tensors (plain or pinned) need no event: both calls do nothing for them, and
// wait_ready does nothing for a storage that was never recorded.
// REQUIRES: record_ready of one storage is not called concurrently with another record
// of it (one writer at a time, as the pipeline's message order guarantees); wait_ready may
// run on any thread once the tensor has been handed over.
void record_ready(const Tensor& tensor, cudaStream_t stream);
void wait_ready(const Tensor& tensor, cudaStream_t stream);

}  // namespace conveyor
