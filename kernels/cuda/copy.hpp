#pragma once
// Moving tensors between host and device, and bf16 conversions of host tensors.
// Copies are queued on `stream`. to_host() waits for its copy; to_device() does not:
// from pageable host memory the source may be reused as soon as it returns (the driver
// stages it), from pinned memory the source must stay untouched until the stream has
// passed the copy.
#include <cuda_runtime_api.h>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// A copy of `src` (host or device) on cuda:`device`, same shape and dtype.
Tensor to_device(const Tensor& src, int device, cudaStream_t stream);

/// A host copy of `src` (host or device); waits for the copy to finish.
Tensor to_host(const Tensor& src, cudaStream_t stream);

/// dst = src, any pair of devices; same dtype and element count. Does not wait.
/// Throws std::invalid_argument on a mismatch.
void copy_tensor(Tensor& dst, const Tensor& src, cudaStream_t stream);

/// Host conversions (round to nearest even). REQUIRES: host tensors of dtype f32 / bf16.
Tensor to_bf16_host(const Tensor& f32);
Tensor to_f32_host(const Tensor& bf16);

}  // namespace conveyor
