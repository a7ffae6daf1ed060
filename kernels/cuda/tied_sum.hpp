#pragma once
// model.tie_embeddings when one stage holds both copies of the tied tensor (one pipeline
// stage, or a V-shaped schedule whose first rank holds the first and the last chunk):
// each copy's gradient becomes their sum, on the device, as the cross-stage all-reduce
// does between two stages.
// Invariant: a[i] and b[i] end with the same bits, fl(a[i] + b[i]) (bf16: summed in f32,
// rounded once); a and b do not overlap.
#include <cstdint>

#include "kernels/cuda/types.hpp"

namespace conveyor {

void sum_into_both(float* a, float* b, std::int64_t n, cudaStream_t stream);
void sum_into_both(bf16* a, bf16* b, std::int64_t n, cudaStream_t stream);

}  // namespace conveyor
