#include "kernels/tensor/tensor.hpp"

#include <cstring>

namespace conveyor {

namespace {
std::size_t host_bytes(const Shape& shape, DType dtype) {
  for (auto d : shape.dims())
    if (d < 0) throw std::logic_error("tensor: negative dimension in " + shape.str());
  return static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
}
}  // namespace

Tensor Tensor::zeros(Shape shape, DType dtype, HostZeros zeros) {
  const auto bytes = host_bytes(shape, dtype);
  return wrap(allocate_host(bytes, zeros), std::move(shape), dtype);
}

Tensor Tensor::uninitialized(Shape shape, DType dtype) {
  const auto bytes = host_bytes(shape, dtype);
  return wrap(allocate_host_uninitialized(bytes), std::move(shape), dtype);
}

Tensor Tensor::wrap(std::shared_ptr<Storage> storage, Shape shape, DType dtype,
                    std::size_t offset_bytes) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.offset_ = offset_bytes;
  if (t.offset_ + t.bytes() > t.storage_->bytes())
    throw std::logic_error("tensor: " + t.describe() + " does not fit its storage");
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor t = uninitialized(shape_, dtype_);  // every byte is copied below
  std::memcpy(t.raw(), raw(), bytes());
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (shape.numel() != numel())
    throw std::logic_error("tensor: cannot reshape " + shape_.str() + " to " + shape.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::zero() {
  if (!device().is_cpu()) throw std::logic_error("tensor: zero() on " + device().str());
  std::memset(raw(), 0, bytes());
}

std::string Tensor::describe() const {
  if (!defined()) return "empty tensor";
  return std::string(dtype_name(dtype_)) + " " + shape_.str() + " on " + device().str();
}

}  // namespace conveyor
