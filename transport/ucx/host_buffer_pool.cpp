#include "transport/ucx/host_buffer_pool.hpp"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace conveyor {
namespace {

constexpr std::size_t kAlign = 64;  // as allocate_host

void* allocate(std::size_t bytes) {
  const std::size_t rounded = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

class HostBufferPool::PooledStorage final : public Storage {
 public:
  PooledStorage(std::shared_ptr<HostBufferPool> pool, void* data, std::size_t bytes)
      : pool_(std::move(pool)), data_(data), bytes_(bytes) {}
  ~PooledStorage() override { pool_->give_back(data_, bytes_); }
  PooledStorage(const PooledStorage&) = delete;
  PooledStorage& operator=(const PooledStorage&) = delete;

  void* data() override { return data_; }
  std::size_t bytes() const override { return bytes_; }
  Device device() const override { return Device::cpu(); }

 private:
  std::shared_ptr<HostBufferPool> pool_;
  void* data_;
  std::size_t bytes_;
};

std::shared_ptr<HostBufferPool> HostBufferPool::create(Limits limits) {
  return std::shared_ptr<HostBufferPool>(new HostBufferPool(limits));
}

HostBufferPool::~HostBufferPool() {
  for (auto& [bytes, buffers] : free_)
    for (void* p : buffers) std::free(p);
}

Tensor HostBufferPool::take(const Shape& shape, DType dtype) {
  for (auto d : shape.dims())
    if (d < 0) throw std::logic_error("host buffer pool: negative dimension in " + shape.str());
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  void* data = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      data = it->second.back();
      it->second.pop_back();
      free_bytes_ -= bytes;
    }
  }
  if (!data) data = allocate(bytes);
  std::shared_ptr<Storage> storage;
  try {
    storage = std::make_shared<PooledStorage>(shared_from_this(), data, bytes);
  } catch (...) {
    std::free(data);
    throw;
  }
  return Tensor::wrap(std::move(storage), shape, dtype);
}

void HostBufferPool::give_back(void* data, std::size_t bytes) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (free_bytes_ + bytes <= limits_.max_free_bytes) {
      auto& list = free_[bytes];
      if (list.size() < limits_.max_free_per_size) {
        try {
          list.push_back(data);
          free_bytes_ += bytes;
          return;
        } catch (...) {  // no memory for the list entry: free the buffer instead
        }
      }
    }
  }
  std::free(data);
}

std::size_t HostBufferPool::free_buffers() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [bytes, list] : free_) n += list.size();
  return n;
}

std::size_t HostBufferPool::free_bytes() const {
  std::lock_guard lock(mutex_);
  return free_bytes_;
}

}  // namespace conveyor
