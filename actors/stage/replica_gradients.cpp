#include "actors/stage/replica_gradients.hpp"

#include <memory>
#include <stdexcept>

namespace conveyor {
namespace {

void check_host_f32(const Tensor& t) {
  if (t.dtype() != DType::f32 || !t.device().is_cpu())
    throw std::invalid_argument("gradient averaging across replicas: " + t.describe() +
                                " (f32 host gradients only so far)");
}

}  // namespace

BucketLayout replica_bucket_layout(const ChunkGradients& gradients) {
  BucketLayout layout;
  for (const auto& chunk : gradients) {
    BucketShape shape{0, DType::f32};
    for (const auto& g : chunk) {
      check_host_f32(g);
      shape.elements += static_cast<std::size_t>(g.numel());
    }
    layout.push_back(shape);
  }
  return layout;
}

void average_across_replicas(GradientAllReduce& group, ChunkGradients& gradients) {
  std::vector<std::unique_ptr<AllReduceHandle>> pending;
  for (std::size_t c = 0; c < gradients.size(); ++c) {
    GradientBucket bucket{c, {}};
    for (auto& g : gradients[c]) {
      check_host_f32(g);
      bucket.buffers.push_back(
          GradientBuffer{g.raw(), static_cast<std::size_t>(g.numel()), DType::f32});
    }
    pending.push_back(group.start(bucket));
  }
  for (auto& p : pending) p->wait();
}

}  // namespace conveyor
