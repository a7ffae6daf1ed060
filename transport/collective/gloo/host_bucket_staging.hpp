#pragma once
// A host bucket of several buffers is all-reduced as one flat array (one collective per
// bucket, not one per layer: Gloo's cost is dominated by per-message latency for the small
// buffers of norms and biases). These copy the buffers into the flat array in bucket order
// and back, dividing by the group size on the way back for an average. The division is the
// same IEEE operation on the same bits on every rank, so the ranks stay bitwise identical.
// REQUIRES: every buffer is f32; flat.size() == bucket.elements().
#include <span>

#include "transport/collective/gradient_bucket.hpp"

namespace conveyor {

void pack_bucket(const GradientBucket& bucket, std::span<float> flat);
/// divisor 1 leaves the values as they are (a sum).
void unpack_bucket(std::span<const float> flat, const GradientBucket& bucket, float divisor);
/// Divides one buffer in place (a bucket of one buffer is reduced in place, not staged).
void divide_in_place(std::span<float> values, float divisor);

}  // namespace conveyor
