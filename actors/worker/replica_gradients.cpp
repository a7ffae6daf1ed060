#include "actors/worker/replica_gradients.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include "kernels/optim/optimizer_shard.hpp"

namespace conveyor {
namespace {

BucketShape shape_of(const GradientSpans& bucket, std::size_t index) {
  BucketShape shape{0, bucket.empty() ? DType::f32 : bucket.front().dtype};
  for (const auto& span : bucket) {
    if (span.dtype != shape.dtype)
      throw std::invalid_argument("gradient averaging across replicas: bucket " +
                                  std::to_string(index) + " mixes " +
                                  std::string(dtype_name(shape.dtype)) + " and " +
                                  std::string(dtype_name(span.dtype)) + " gradients");
    shape.elements += span.count;
  }
  return shape;
}

}  // namespace

BucketLayout ReplicaGradients::layout_of(const std::vector<StageModel*>& chunks) {
  BucketLayout layout;
  for (StageModel* model : chunks)
    for (const auto& bucket : model->gradient_buckets())
      layout.push_back(shape_of(bucket, layout.size()));
  return layout;
}

ReplicaGradients::ReplicaGradients(std::unique_ptr<GradientAllReduce> group,
                                   std::vector<StageModel*> chunks, bool shard_optimizer_state)
    : group_(std::move(group)),
      shard_optimizer_state_(shard_optimizer_state),
      chunks_(std::move(chunks)),
      buckets_(chunks_.size()) {
  std::size_t next = 0;
  for (StageModel* model : chunks_) {
    first_bucket_.push_back(next);
    next += model->gradient_buckets().size();
  }
  if (next != group_->layout().size())
    throw std::invalid_argument(group_->group().describe() + ": the models have " +
                                std::to_string(next) + " gradient buckets, the group " +
                                std::to_string(group_->layout().size()));
  pending_.resize(next);
  if (shard_optimizer_state_)
    for (StageModel* model : chunks_)
      model->shard_optimizer_state(group_->group().rank, group_->group().size);
}

double ReplicaGradients::gather_parameters() {
  const auto began = std::chrono::steady_clock::now();
  const int ranks = group_->group().size;
  for (StageModel* model : chunks_) {
    std::vector<GradientSpan> spans = model->parameter_spans();
    std::int64_t total = 0;
    for (const GradientSpan& s : spans) total += static_cast<std::int64_t>(s.count);
    std::vector<std::size_t> counts;
    for (const std::int64_t n : replica_shard_sizes(total, ranks))
      counts.push_back(static_cast<std::size_t>(n));
    group_->all_gather(spans, counts);
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began)
      .count();
}

ReplicaGradients::~ReplicaGradients() { settle(); }

void ReplicaGradients::settle() noexcept {
  for (auto& handle : pending_) {
    if (!handle) continue;
    try {
      handle->wait();
    } catch (...) {
      // Failed is settled too: the group no longer touches the bucket's buffers.
    }
    handle.reset();
  }
}

void ReplicaGradients::start(std::size_t chunk, std::size_t local) {
  const std::size_t index = first_bucket_[chunk] + local;
  if (pending_[index])
    throw std::logic_error(group_->group().describe() + ": bucket " + std::to_string(index) +
                           " named final twice in one step");
  const GradientBucket bucket{index, buckets_[chunk].at(local)};
  pending_[index] = group_->start_after(bucket, chunks_[chunk]->compute_stream());
}

void ReplicaGradients::arm(std::size_t chunk) {
  // Fetched every step: a CPU model's gradient tensors may be other allocations by now.
  buckets_[chunk] = chunks_[chunk]->gradient_buckets();
  chunks_[chunk]->notify_final_buckets([this, chunk](std::size_t local) { start(chunk, local); });
}

void ReplicaGradients::after_last_backward(std::size_t chunk) {
  for (std::size_t local = 0; local < buckets_[chunk].size(); ++local)
    if (!pending_[first_bucket_[chunk] + local]) start(chunk, local);
}

ReductionTiming ReplicaGradients::finish() {
  for (std::size_t i = 0; i < pending_.size(); ++i)
    if (!pending_[i])
      throw std::logic_error(group_->group().describe() + ": bucket " + std::to_string(i) +
                             " was not started this step");
  // The stage's own compute first: what the reductions take beyond it is exposed.
  for (StageModel* model : chunks_) model->synchronize();
  const auto computed = std::chrono::steady_clock::now();
  ReductionTiming timing;
  try {
    for (auto& handle : pending_) handle->wait();
  } catch (...) {
    settle();
    throw;
  }
  timing.exposed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - computed).count();
  for (auto& handle : pending_) {
    timing.busy_ms += handle->elapsed_ms();
    handle.reset();
  }
  return timing;
}

}  // namespace conveyor
