#pragma once
// A dense, row-major tensor: a shape and dtype over shared storage.
// Copying a Tensor copies the handle, not the bytes: that is how activations move
// between stage actors of one process without a copy. `clone()` copies the bytes.
// Invariant: offset_ + numel * dtype_size(dtype_) <= storage_->bytes().
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/tensor/device.hpp"
#include "kernels/tensor/dtype.hpp"
#include "kernels/tensor/shape.hpp"
#include "kernels/tensor/storage.hpp"

namespace conveyor {

class Tensor {
 public:
  Tensor() = default;  // an empty handle: defined() is false

  /// Zero-filled host tensor (HostZeros::fresh_pages for large ones made once: storage.hpp).
  static Tensor zeros(Shape shape, DType dtype = DType::f32,
                      HostZeros zeros = HostZeros::memset);
  /// Host tensor whose elements are unspecified until written: for an output that a kernel
  /// writes whole with = (storage.hpp: allocate_host_uninitialized).
  static Tensor uninitialized(Shape shape, DType dtype = DType::f32);
  /// A tensor over existing storage, starting `offset_bytes` into it.
  static Tensor wrap(std::shared_ptr<Storage> storage, Shape shape, DType dtype,
                     std::size_t offset_bytes = 0);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_[i]; }
  std::int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage_with(const Tensor& o) const { return storage_ && storage_ == o.storage_; }

  void* raw() { return static_cast<char*>(storage_->data()) + offset_; }
  const void* raw() const { return static_cast<const char*>(storage_->data()) + offset_; }

  /// Typed access; throws std::logic_error on a dtype or device mismatch.
  float* f32() { return typed<float>(DType::f32); }
  const float* f32() const { return const_cast<Tensor*>(this)->typed<float>(DType::f32); }
  std::int32_t* i32() { return typed<std::int32_t>(DType::i32); }
  const std::int32_t* i32() const {
    return const_cast<Tensor*>(this)->typed<std::int32_t>(DType::i32);
  }
  std::span<float> f32_span() { return {f32(), static_cast<std::size_t>(numel())}; }
  std::span<const float> f32_span() const { return {f32(), static_cast<std::size_t>(numel())}; }

  /// A deep copy on the host.
  Tensor clone() const;
  /// Same bytes, another shape with the same element count.
  Tensor reshape(Shape shape) const;
  /// Fills with zeros (host only).
  void zero();

  /// "f32 (4, 64, 128) on cpu", for error messages.
  std::string describe() const;

 private:
  template <class T>
  T* typed(DType want) {
    if (!storage_) throw std::logic_error("tensor: access to an empty tensor");
    if (dtype_ != want)
      throw std::logic_error("tensor: dtype is " + std::string(dtype_name(dtype_)) +
                             ", accessed as " + std::string(dtype_name(want)));
    if (!device().is_cpu()) throw std::logic_error("tensor: host access to " + device().str());
    return static_cast<T*>(raw());
  }

  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
};

}  // namespace conveyor
