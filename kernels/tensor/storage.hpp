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

/// Host memory, 64-byte aligned, zero-filled (from 1 MiB on: fresh pages, mapped on first
/// write). Throws std::bad_alloc when there is none.
std::shared_ptr<Storage> allocate_host(std::size_t bytes);

}  // namespace conveyor
