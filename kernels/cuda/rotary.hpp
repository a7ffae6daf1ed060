#pragma once
// Rotary position embedding on the device, Hugging Face's rotate-half convention
// (kernels/cpu/rotary.hpp has the formulas, the llama3 frequency scaling and the tables):
// for head dim D the pairs are (i, i + D/2), rotated by t w_i at position t. Applied in
// place, in fp32 on bf16 storage, to a (B, T, H, D) slice whose (b, t) rows are row_stride
// elements apart, so it runs on a fused [q | k | v] row without a copy. q and k sit side
// by side in that row (q: heads * D, then k: kv_heads * D), so ONE call with
// H = heads + kv_heads over the row's start rotates both in a single pass over memory.
// Backward: the rotation is orthogonal, so the input gradient is the inverse rotation
// (angle -t w_i) applied in place to the gradient; no parameters.
// Tables: cos and sin as fp32 (T, D/2), row t for position t (cpu::rotary_tables<float>,
// computed in double and rounded once); a table built for more positions serves any
// shorter T.
// REQUIRES: D even; row_stride >= H * D.
#include <cstdint>

#include "kernels/cuda/types.hpp"

namespace conveyor {

void rotary_forward(bf16* x,           // (B, T, H, D) in place, rows row_stride apart
                    const float* cos,  // (T, D/2)
                    const float* sin,  // (T, D/2)
                    int B, int T, int H, int D, std::int64_t row_stride, cudaStream_t stream);

void rotary_backward(bf16* dx,          // (B, T, H, D) in place: dout in, dinp out (=)
                     const float* cos,  // (T, D/2)
                     const float* sin,  // (T, D/2)
                     int B, int T, int H, int D, std::int64_t row_stride, cudaStream_t stream);

}  // namespace conveyor
