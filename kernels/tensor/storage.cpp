#include "kernels/tensor/storage.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace conveyor {
namespace {

class HostStorage final : public Storage {
 public:
  explicit HostStorage(std::size_t bytes) : bytes_(bytes) {
    constexpr std::size_t kAlign = 64;
    std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    data_ = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, rounded == 0 ? kAlign : rounded);
  }
  ~HostStorage() override { std::free(data_); }
  HostStorage(const HostStorage&) = delete;
  HostStorage& operator=(const HostStorage&) = delete;

  void* data() override { return data_; }
  std::size_t bytes() const override { return bytes_; }
  Device device() const override { return Device::cpu(); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

}  // namespace

std::shared_ptr<Storage> allocate_host(std::size_t bytes) {
  return std::make_shared<HostStorage>(bytes);
}

}  // namespace conveyor
