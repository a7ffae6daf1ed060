#include "kernels/tensor/storage.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace conveyor {
namespace {

// HostZeros::fresh_pages blocks from this size on are anonymous mappings (storage.hpp).
constexpr std::size_t kMappedFrom = std::size_t{1} << 20;

std::atomic<bool> poison_uninitialized{false};

// What a new block holds: zeros (one of two ways, HostZeros) or bytes left unspecified.
enum class Fill { memset, fresh_pages, none };

Fill fill_of(HostZeros zeros) {
  return zeros == HostZeros::fresh_pages ? Fill::fresh_pages : Fill::memset;
}

class HostStorage final : public Storage {
 public:
  HostStorage(std::size_t bytes, Fill fill) : bytes_(bytes) {
    constexpr std::size_t kAlign = 64;
    const std::size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (fill == Fill::fresh_pages && rounded >= kMappedFrom) {
      void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = p;
      mapped_ = rounded;
    } else {
      data_ = std::aligned_alloc(kAlign, rounded);
      if (!data_) throw std::bad_alloc();
      if (fill != Fill::none)
        std::memset(data_, 0, rounded);
      else if (poison_uninitialized.load(std::memory_order_relaxed))
        std::memset(data_, 0xFF, rounded);
    }
  }
  ~HostStorage() override {
    if (mapped_)
      munmap(data_, mapped_);
    else
      std::free(data_);
  }
  HostStorage(const HostStorage&) = delete;
  HostStorage& operator=(const HostStorage&) = delete;

  void* data() override { return data_; }
  std::size_t bytes() const override { return bytes_; }
  Device device() const override { return Device::cpu(); }

 private:
  void* data_ = nullptr;
  std::size_t mapped_ = 0;  // the mapping's length, or 0 for aligned_alloc
  std::size_t bytes_;
};

}  // namespace

std::shared_ptr<Storage> allocate_host(std::size_t bytes, HostZeros zeros) {
  return std::make_shared<HostStorage>(bytes, fill_of(zeros));
}

std::shared_ptr<Storage> allocate_host_uninitialized(std::size_t bytes) {
  return std::make_shared<HostStorage>(bytes, Fill::none);
}

void poison_uninitialized_host(bool on) { poison_uninitialized.store(on); }

}  // namespace conveyor
