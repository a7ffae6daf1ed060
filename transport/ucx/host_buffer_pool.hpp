#pragma once
// Host buffers for received tensors, reused from one message to the next.
//
// A receive into a fresh buffer pays for the kernel zero-filling every page on first
// touch (and UCX re-registers the new pages): at 64 MiB that cost more than the transfer
// itself on loopback. The pool hands out buffers that earlier tensors let go of, keyed by
// their exact byte size, without zero-filling them.
//
//   auto pool = HostBufferPool::create();
//   Tensor t = pool->take(shape, DType::f32);   // contents unspecified: the receive fills it
//   ...                                         // the last Tensor handle goes away →
//                                               // the buffer is free for the next take()
//
// Invariant: a buffer is either in the free list or held by exactly one Storage, never
// both; take() removes it from the free list before wrapping it, and only the Storage's
// destructor (the last tensor handle gone) puts it back. So two live tensors never share a
// pooled buffer unless one was made from the other (a copied handle, a reshape).
// Bounds: at most `max_free_per_size` idle buffers of one size and `max_free_bytes` idle
// bytes in all; a buffer returned beyond either is freed.
// Lifetime: every Storage holds the pool; the pool frees its idle buffers when the last
// Storage and the last owner have gone, so tensors may outlive the worker that made them.
// Thread-safety: every member may be called from any thread; tensors may be released on
// any thread.
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class HostBufferPool : public std::enable_shared_from_this<HostBufferPool> {
 public:
  struct Limits {
    std::size_t max_free_per_size = 8;
    std::size_t max_free_bytes = std::size_t{1} << 30;
  };

  static std::shared_ptr<HostBufferPool> create(Limits limits);
  static std::shared_ptr<HostBufferPool> create() { return create(Limits{}); }
  ~HostBufferPool();
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;

  /// A host tensor over a buffer no other live storage holds; its bytes are unspecified.
  Tensor take(const Shape& shape, DType dtype);

  /// Idle buffers and their bytes, for tests and logs.
  std::size_t free_buffers() const;
  std::size_t free_bytes() const;

 private:
  class PooledStorage;
  explicit HostBufferPool(Limits limits) : limits_(limits) {}
  void give_back(void* data, std::size_t bytes) noexcept;

  Limits limits_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;  // by byte size
  std::size_t free_bytes_ = 0;
};

}  // namespace conveyor
