#include "kernels/cuda/allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <deque>
#include <memory>

#include "kernels/cuda/device_guard.hpp"

namespace conveyor {

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return std::string(buf) + " (" + std::to_string(bytes) + " bytes)";
}

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  constexpr std::size_t kSmall = 4096, kLarge = std::size_t{64} << 20, kLargeStep = 2 << 20;
  if (bytes <= kSmall) return std::max<std::size_t>(512, (bytes + 511) / 512 * 512);
  if (bytes > kLarge) return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
  // four classes per power of two: 2^k * {1, 1.25, 1.5, 1.75}
  const std::size_t pow2 = std::bit_floor(bytes);
  const std::size_t step = pow2 / 4;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(std::size_t bytes, cudaStream_t stream, std::string_view label) {
  if (bytes == 0) return nullptr;
  const std::size_t size = size_class(bytes);
  std::lock_guard lock(mu_);
  void* ptr = nullptr;
  auto it = free_.find({stream, size});
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    ++stats_.cache_hits;
  } else {
    DeviceGuard guard(device_);
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      CUDA_CHECK(cudaDeviceSynchronize());  // cached blocks may still be in use by queued work
      release_cached_locked();
      err = cudaMalloc(&ptr, size);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      std::size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      throw CudaOutOfMemory("cuda:" + std::to_string(device_) + " out of memory: requested " +
                                format_bytes(bytes) + " for '" + std::string(label) +
                                "' (size class " + format_bytes(size) + "); the device has " +
                                format_bytes(free_b) + " free of " + format_bytes(total_b) +
                                "; this allocator holds " + format_bytes(stats_.in_use) +
                                " in use and " + format_bytes(stats_.cached()) + " cached",
                            bytes, free_b);
    }
    if (err != cudaSuccess)
      detail::throw_cuda_error(err, "cudaMalloc", __FILE__, __LINE__);
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  live_.emplace(ptr, Block{size, stream});
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  ++stats_.allocations;
  return ptr;
}

void CachingAllocator::release(void* ptr) noexcept {
  if (!ptr) return;
  std::lock_guard lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: a bug, but a destructor must not throw
  const Block b = it->second;
  live_.erase(it);
  stats_.in_use -= b.size;
  try {
    free_[{b.stream, b.size}].push_back(ptr);
  } catch (...) {
    // No memory for the free list: give the block back to the driver instead.
    (void)cudaFree(ptr);
    stats_.reserved -= b.size;
  }
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, ptrs] : free_) {
    for (void* p : ptrs) {
      (void)cudaFree(p);
      stats_.reserved -= key.second;
    }
  }
  free_.clear();
  (void)cudaGetLastError();
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  DeviceGuard guard(device_);
  CUDA_CHECK(cudaDeviceSynchronize());
  release_cached_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

CachingAllocator& cuda_allocator(int device) {
  static std::mutex mu;
  // Leaked on purpose: see the header (no destruction at exit).
  static auto* allocators = new std::deque<std::unique_ptr<CachingAllocator>>();
  std::lock_guard lock(mu);
  if (device < 0) throw CudaError("cuda_allocator: negative device index " + std::to_string(device));
  while (allocators->size() <= static_cast<std::size_t>(device))
    allocators->push_back(std::make_unique<CachingAllocator>(static_cast<int>(allocators->size())));
  return *(*allocators)[static_cast<std::size_t>(device)];
}

int current_device() {
  int d = 0;
  CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

}  // namespace conveyor
