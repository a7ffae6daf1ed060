#include "kernels/cuda/device_storage.hpp"

#include <cstring>
#include <mutex>
#include <string>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"

namespace conveyor {
namespace {

class DeviceStorage final : public Storage {
 public:
  DeviceStorage(std::size_t bytes, int device, cudaStream_t stream, std::string_view label)
      : buffer_(bytes, device, stream, label), device_(device) {}
  ~DeviceStorage() override {
    if (ready_) (void)cudaEventDestroy(ready_);  // a pending record completes on its own
  }
  DeviceStorage(const DeviceStorage&) = delete;
  DeviceStorage& operator=(const DeviceStorage&) = delete;
  void* data() override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }
  Device device() const override { return Device::cuda(device_); }

  void record_ready(cudaStream_t stream) {
    int stream_device = 0;
    CUDA_CHECK(cudaStreamGetDevice(stream, &stream_device));
    DeviceGuard guard(stream_device);  // an event is recorded on a stream of its own device
    std::lock_guard lock(mu_);
    if (ready_ && ready_device_ != stream_device) {
      CUDA_CHECK(cudaEventDestroy(ready_));
      ready_ = nullptr;
    }
    if (!ready_) {
      CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      ready_device_ = stream_device;
    }
    CUDA_CHECK(cudaEventRecord(ready_, stream));
  }

  void wait_ready(cudaStream_t stream) {
    std::lock_guard lock(mu_);
    if (ready_) CUDA_CHECK(cudaStreamWaitEvent(stream, ready_, 0));
  }

 private:
  DeviceBuffer buffer_;
  int device_;
  std::mutex mu_;                 // guards the event below
  cudaEvent_t ready_ = nullptr;   // recorded after the last write; null: never recorded
  int ready_device_ = -1;
};

DeviceStorage* device_storage_of(const Tensor& tensor) {
  return tensor.defined() ? dynamic_cast<DeviceStorage*>(tensor.storage().get()) : nullptr;
}

class PinnedStorage final : public Storage {
 public:
  explicit PinnedStorage(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    CUDA_CHECK(cudaMallocHost(&data_, bytes));
    std::memset(data_, 0, bytes);
  }
  ~PinnedStorage() override {
    if (data_) (void)cudaFreeHost(data_);
  }
  PinnedStorage(const PinnedStorage&) = delete;
  PinnedStorage& operator=(const PinnedStorage&) = delete;
  void* data() override { return data_; }
  std::size_t bytes() const override { return bytes_; }
  Device device() const override { return Device::cpu(); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

std::size_t checked_bytes(const Shape& shape, DType dtype) {
  for (auto d : shape.dims())
    if (d < 0) throw std::logic_error("tensor: negative dimension in " + shape.str());
  return static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
}

}  // namespace

std::shared_ptr<Storage> allocate_device(std::size_t bytes, int device, cudaStream_t stream,
                                         std::string_view label) {
  return std::make_shared<DeviceStorage>(bytes, device, stream, label);
}

std::shared_ptr<Storage> allocate_pinned(std::size_t bytes) {
  return std::make_shared<PinnedStorage>(bytes);
}

bool is_pinned(const Storage& storage) {
  return dynamic_cast<const PinnedStorage*>(&storage) != nullptr;
}

Tensor empty_cuda(Shape shape, DType dtype, int device, cudaStream_t stream,
                  std::string_view label) {
  const std::size_t bytes = checked_bytes(shape, dtype);
  return Tensor::wrap(allocate_device(bytes, device, stream, label), std::move(shape), dtype);
}

Tensor zeros_cuda(Shape shape, DType dtype, int device, cudaStream_t stream,
                  std::string_view label) {
  Tensor t = empty_cuda(std::move(shape), dtype, device, stream, label);
  if (t.bytes() > 0) {
    DeviceGuard guard(device);
    CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.bytes(), stream));
  }
  return t;
}

void record_ready(const Tensor& tensor, cudaStream_t stream) {
  if (DeviceStorage* s = device_storage_of(tensor)) s->record_ready(stream);
}

void wait_ready(const Tensor& tensor, cudaStream_t stream) {
  if (DeviceStorage* s = device_storage_of(tensor)) s->wait_ready(stream);
}

Tensor zeros_pinned(Shape shape, DType dtype) {
  const std::size_t bytes = checked_bytes(shape, dtype);
  return Tensor::wrap(allocate_pinned(bytes), std::move(shape), dtype);
}

}  // namespace conveyor
