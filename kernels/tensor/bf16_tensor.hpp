#pragma once
// A host f32 tensor narrowed to bfloat16, each value rounded to nearest even
// (float_to_bf16_bits, bitwise the device's rounding): for files half the size.
#include <cstdint>

#include "kernels/tensor/bf16.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// REQUIRES: `f32` is a host f32 tensor.
inline Tensor to_bf16(const Tensor& f32) {
  Tensor out = Tensor::uninitialized(f32.shape(), DType::bf16);
  auto* bits = static_cast<std::uint16_t*>(out.raw());
  const float* values = f32.f32();
  for (std::int64_t i = 0; i < f32.numel(); ++i) bits[i] = float_to_bf16_bits(values[i]);
  return out;
}

}  // namespace conveyor
