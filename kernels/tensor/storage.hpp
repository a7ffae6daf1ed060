#pragma once
// A block of bytes on one device. Storage is shared between tensors (and between
// actors in one process) through shared_ptr; it is freed when the last holder lets go.
// Thread-safety: a Storage is not synchronised; the pipeline's message order is what
// guarantees a single writer (a stage writes an activation, then hands it on).
#include <cstddef>
#include <memory>

#include "kernels/tensor/device.hpp"

namespace conveyor {

class Storage {
 public:
  virtual ~Storage() = default;
  virtual void* data() = 0;
  virtual std::size_t bytes() const = 0;
  virtual Device device() const = 0;
};

/// How a host block comes to read as zero.
enum class HostZeros {
  /// From the allocator, then memset: for blocks made over and over (activations, per-step
  /// gradients), which the allocator hands back without a page fault.
  memset,
  /// From 1 MiB on, fresh pages straight from the kernel: zero without a memset, costing
  /// memory only once written, each page faulted in by the thread that writes it first. For
  /// large blocks made once (parameters, their gradients, upload images); made per step
  /// they would pay a fault per page each time (a 4.6% slower CPU step, measured).
  fresh_pages,
};

/// Host memory, 64-byte aligned, zero-filled. Throws std::bad_alloc when there is none.
std::shared_ptr<Storage> allocate_host(std::size_t bytes, HostZeros zeros = HostZeros::memset);

/// Host memory, 64-byte aligned, its bytes unspecified: for a block that a kernel writes
/// whole (with =) before anything reads it. Skips the memset, which was ~5% of a CPU step.
std::shared_ptr<Storage> allocate_host_uninitialized(std::size_t bytes);

/// For tests: while on, every uninitialized block is filled with 0xFF bytes (a NaN in every
/// float, -1 in every integer), so a kernel that reads such a block before writing it
/// changes its results instead of reading whatever the allocator handed back.
void poison_uninitialized_host(bool on);

}  // namespace conveyor
