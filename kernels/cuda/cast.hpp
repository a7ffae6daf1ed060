#pragma once
// Element-wise conversions between fp32 and bf16 on the device (round to nearest even,
// bitwise the same as float_to_bf16_bits in bf16.hpp).
#include "kernels/cuda/types.hpp"

namespace conveyor {

void cast_f32_to_bf16(bf16* out, const float* inp, std::int64_t n, cudaStream_t stream);  // (n)
void cast_bf16_to_f32(float* out, const bf16* inp, std::int64_t n, cudaStream_t stream);  // (n)

}  // namespace conveyor
