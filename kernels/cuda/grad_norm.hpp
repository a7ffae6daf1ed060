#pragma once
// Sum of squares of a flat fp32 (or bf16) buffer (the gradient norm for clipping) as a
// deterministic two-pass reduction: a fixed number of blocks (independent of the GPU) each
// sum a fixed strided subset in a fixed order and reduce in a fixed tree; one block then
// adds the partials in block order. No atomics: the same input gives the same bits.
// The result stays on the device, so AdamW can clip without a host round trip.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/types.hpp"

namespace conveyor {

/// *out = sum_i x_i^2, or *out += it when `accumulate` (to chain per-parameter calls in the
/// global parameter order). `out` is device memory (one float).
void grad_square_sum(float* out, const float* x, std::int64_t n, bool accumulate,
                     cudaStream_t stream);
/// The same over bf16 gradients (optim.grad_dtype bf16): each element widened to fp32, then
/// squared and summed in fp32 in the same order.
void grad_square_sum(float* out, const bf16* x, std::int64_t n, bool accumulate,
                     cudaStream_t stream);

/// Segments of one flat buffer summed in one batch (grad_square_sums): segment i is
/// counts[i] elements from base + offsets[i]. Device arrays, kept by the caller;
/// `partials` is device scratch of grad_square_sum_partials(count) floats.
struct SquareSumSegments {
  const std::int64_t* offsets = nullptr;
  const std::int64_t* counts = nullptr;
  float* partials = nullptr;
  int count = 0;
};

/// Floats of scratch that grad_square_sums needs for `segments` segments.
std::size_t grad_square_sum_partials(int segments);

/// out[i] = sum of squares of segment i, for every segment in two launches (not two per
/// segment): bitwise what grad_square_sum(out + i, base + offsets[i], counts[i], false)
/// gives, since each segment is reduced in the same order. At most 65535 segments.
void grad_square_sums(float* out, const float* base, const SquareSumSegments& segments,
                      cudaStream_t stream);
void grad_square_sums(float* out, const bf16* base, const SquareSumSegments& segments,
                      cudaStream_t stream);

}  // namespace conveyor
