#pragma once
// A stage's weight gradients as buckets of its replica group (parallel.data > 1, issue 9):
// one bucket per chunk, holding that chunk's gradient tensors in parameter order. The
// buckets are averaged after the stage's last backward action of the step, before its
// report: not overlapped with backward yet (issue 9 item 3).
//
// What must hold: every replica of a stage holds the same chunks with the same parameters,
// so every replica declares the same layout and starts the same buckets in the same order.
// The average is written in place into the gradient tensors; every replica ends with the
// same bits (the group's guarantee), so the optimizer steps keep the replicas identical.
// CAF-free.
#include <vector>

#include "kernels/tensor/tensor.hpp"
#include "transport/collective/gradient_all_reduce.hpp"

namespace conveyor {

/// Gradient tensors by chunk, each chunk in parameter order.
using ChunkGradients = std::vector<std::vector<Tensor>>;

/// One f32 bucket per chunk with the chunk's element count. Throws std::invalid_argument
/// for a gradient that is not an f32 host tensor (the Gloo group reduces host memory).
BucketLayout replica_bucket_layout(const ChunkGradients& gradients);

/// Starts every chunk's bucket, then waits for all: returns with the gradients replaced by
/// their average across the group. Throws what the group throws (CollectiveError).
void average_across_replicas(GradientAllReduce& group, ChunkGradients& gradients);

}  // namespace conveyor
