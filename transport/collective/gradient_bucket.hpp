#pragma once
// A bucket: gradient buffers of several layers (contiguous, each with its own length)
// averaged as one unit, so that it can start as soon as those layers' backward of the last
// micro-batch is done while other layers still compute (issue 9, item 3).
//
// Every rank of a stage group declares the same BucketLayout when the group is built; the
// group checks that the ranks agree (layout_agreement.hpp) and start() checks each bucket
// against its declared shape before anything is sent. Why declare it up front: a
// collective whose ranks disagree on its size does not fail cleanly (Gloo's TCP transport
// asserts inside its I/O thread and ends the process; NCCL hangs or reads past the end).
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/model/gradient_buckets.hpp"
#include "kernels/tensor/dtype.hpp"

namespace conveyor {

/// One contiguous buffer of `count` elements: host memory for the Gloo group, device memory
/// (of the group's device) for the NCCL group. Not owned. The same record as a stage
/// model's gradient span, so a model's buckets go to the group as they are.
using GradientBuffer = GradientSpan;

/// The buffers of bucket `index`; their counts add up to the layout's count for it.
struct GradientBucket {
  std::size_t index = 0;
  std::vector<GradientBuffer> buffers;

  std::size_t elements() const;
};

/// What one bucket holds: `elements` values of one dtype.
struct BucketShape {
  std::size_t elements = 0;
  DType dtype = DType::f32;
  bool operator==(const BucketShape&) const = default;
};

using BucketLayout = std::vector<BucketShape>;

/// Sum, or sum then divide by the group size (the gradient average).
enum class Reduction { sum, average };

/// "f32x1000 bf16x7": a layout as text, for error messages and for the store.
std::string describe_layout(const BucketLayout& layout);

/// Throws std::invalid_argument (prefixed by `who`) unless `bucket` names a bucket of
/// `layout`, holds its element count, has the bucket's dtype in every buffer and no null
/// buffer with elements.
void check_bucket(const GradientBucket& bucket, const BucketLayout& layout,
                  const std::string& who);

}  // namespace conveyor
