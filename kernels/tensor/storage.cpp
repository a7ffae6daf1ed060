#include "kernels/tensor/storage.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace conveyor {
namespace {

// HostZeros::fresh_pages blocks from this size on are anonymous mappings (storage.hpp).
constexpr std::size_t kMappedFrom = std::size_t{1} << 20;

class HostStorage final : public Storage {
 public:
  HostStorage(std::size_t bytes, HostZeros zeros) : bytes_(bytes) {
    constexpr std::size_t kAlign = 64;
    const std::size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (zeros == HostZeros::fresh_pages && rounded >= kMappedFrom) {
      void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = p;
      mapped_ = rounded;
    } else {
      data_ = std::aligned_alloc(kAlign, rounded);
      if (!data_) throw std::bad_alloc();
      std::memset(data_, 0, rounded);
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
  return std::make_shared<HostStorage>(bytes, zeros);
}

}  // namespace conveyor
