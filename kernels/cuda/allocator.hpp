#pragma once
// A stream-ordered caching allocator for device memory, one per device.
//
// Blocks are rounded up to a size class and, when released, go to the free list of
// (stream they were allocated on, size class). A later allocation on the same stream and
// class takes a block from that list without calling the driver: work queued on one stream
// runs in order, so the next user of the block cannot overtake the previous one. Blocks
// never move between streams.
//
// REQUIRES: a block used on a stream other than the one it was allocated on is released
// only after that other stream's use is complete (synchronise, or make the allocating
// stream wait on an event recorded after the use). There is no record_stream yet.
//
// On a failed cudaMalloc the allocator synchronises the device, returns every cached block
// to the driver and tries once more; if that fails it throws CudaOutOfMemory naming the
// request, its label and what is free.
//
// Thread-safety: all members are safe to call from several threads (one mutex).
// The per-device allocators live until the process exits and are never destroyed, so a
// Storage released during static destruction does not meet a dead allocator.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/check.hpp"

namespace conveyor {

/// Thrown when the device cannot hold a request even after the cache is emptied.
class CudaOutOfMemory : public CudaError {
 public:
  CudaOutOfMemory(const std::string& message, std::size_t requested, std::size_t free_bytes)
      : CudaError(message), requested_(requested), free_bytes_(free_bytes) {}
  std::size_t requested() const { return requested_; }
  std::size_t free_bytes() const { return free_bytes_; }

 private:
  std::size_t requested_;
  std::size_t free_bytes_;
};

struct AllocatorStats {
  std::size_t in_use = 0;         // bytes (rounded to size classes) held by callers
  std::size_t reserved = 0;       // bytes obtained from cudaMalloc and not yet returned
  std::size_t peak_in_use = 0;    // high-water mark of in_use since the last reset_peak()
  std::size_t peak_reserved = 0;  // high-water mark of reserved since the last reset_peak()
  std::uint64_t allocations = 0;  // allocate() calls that returned memory
  std::uint64_t cache_hits = 0;   // of which served from a free list
  std::size_t cached() const { return reserved - in_use; }
};

class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  int device() const { return device_; }

  /// A block of at least `bytes` bytes, 256-byte aligned, usable in stream order on
  /// `stream`. `label` says what it is for (it appears in the out-of-memory error).
  /// Returns nullptr for 0 bytes. Throws CudaOutOfMemory, or CudaError on other failures.
  void* allocate(std::size_t bytes, cudaStream_t stream, std::string_view label);

  /// Returns a block to its stream's free list. Never throws; ignores nullptr.
  /// REQUIRES: `ptr` came from allocate() of this allocator and is not released yet.
  void release(void* ptr) noexcept;

  /// Synchronises the device and returns every cached (free) block to the driver.
  void empty_cache();

  AllocatorStats stats() const;
  void reset_peak();

  /// The size a request of `bytes` is rounded up to: multiples of 512 up to 4 KiB, then
  /// four classes per power of two (at most 25% waste) up to 64 MiB, then multiples of
  /// 2 MiB.
  static std::size_t size_class(std::size_t bytes);

 private:
  struct Block {
    std::size_t size;
    cudaStream_t stream;
  };
  void release_cached_locked();  // REQUIRES: mu_ held

  int device_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block> live_;
  std::map<std::pair<cudaStream_t, std::size_t>, std::vector<void*>> free_;
  AllocatorStats stats_;
};

/// The allocator of device `device` (created on first use).
CachingAllocator& cuda_allocator(int device);

/// "1.50 GiB (1610612736 bytes)", for messages.
std::string format_bytes(std::size_t bytes);

/// Owns one block of device memory; returns it to the allocator on destruction.
/// Move-only. Used for scratch space inside launchers and for plain device arrays.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, int device, cudaStream_t stream, std::string_view label)
      : allocator_(&cuda_allocator(device)),
        data_(allocator_->allocate(bytes, stream, label)),
        bytes_(bytes) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : allocator_(std::exchange(o.allocator_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      allocator_ = std::exchange(o.allocator_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  void reset() noexcept {
    if (allocator_ && data_) allocator_->release(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  CachingAllocator* allocator_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// The device that is current for this thread.
int current_device();

}  // namespace conveyor
