#pragma once
// The storage of a tensor whose bytes are still in another process. CAF delivers a
// WeightsReply from a stage in another process with its names, shapes and dtypes only
// (wire_format.hpp); each of its tensors then sits on a PendingPayload that records the
// transport tag its bytes travel under, until fetch_remote_weights() replaces it with the
// received tensor. Memory is allocated (zero-filled) only if someone touches data().
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/tensor/storage.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class PendingPayload final : public Storage {
 public:
  PendingPayload(std::size_t bytes, std::uint64_t tag) : bytes_(bytes), tag_(tag) {}
  void* data() override {
    if (!host_) host_ = allocate_host(bytes_);
    return host_->data();
  }
  std::size_t bytes() const override { return bytes_; }
  Device device() const override { return Device::cpu(); }
  std::uint64_t tag() const { return tag_; }

 private:
  std::size_t bytes_;
  std::uint64_t tag_;
  std::shared_ptr<Storage> host_;
};

/// The tag of a pending payload, or nullptr when `t` holds its bytes.
inline const PendingPayload* pending_payload(const Tensor& t) {
  return dynamic_cast<const PendingPayload*>(t.storage().get());
}

}  // namespace conveyor
