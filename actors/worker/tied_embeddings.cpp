#include "actors/worker/tied_embeddings.hpp"

#include <stdexcept>
#include <string>

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/tied_sum.hpp"
#endif

namespace conveyor {
namespace {

// Both copies held here: fl(a + b) into both, where the model computes.
void sum_in_place(const GradientSpan& a, const GradientSpan& b, void* stream) {
  if (a.count != b.count || a.dtype != b.dtype)
    throw std::invalid_argument("model.tie_embeddings: the two copies' gradients differ (" +
                                std::to_string(a.count) + " vs " + std::to_string(b.count) +
                                " elements)");
  if (stream) {
#if CONVEYOR_WITH_CUDA
    const auto n = static_cast<std::int64_t>(a.count);
    const auto s = static_cast<cudaStream_t>(stream);
    if (a.dtype == DType::bf16)
      sum_into_both(static_cast<bf16*>(a.data), static_cast<bf16*>(b.data), n, s);
    else
      sum_into_both(static_cast<float*>(a.data), static_cast<float*>(b.data), n, s);
    return;
#else
    throw std::logic_error("model.tie_embeddings: a device gradient in a build without CUDA");
#endif
  }
  if (a.dtype != DType::f32)
    throw std::invalid_argument("model.tie_embeddings: host gradients must be f32");
  auto* x = static_cast<float*>(a.data);
  auto* y = static_cast<float*>(b.data);
  for (std::size_t i = 0; i < a.count; ++i) x[i] = y[i] = x[i] + y[i];
}

}  // namespace

std::vector<TiedEmbeddings::Copy> TiedEmbeddings::copies_of(const std::vector<StageModel*>& chunks) {
  std::vector<Copy> out;
  for (std::size_t c = 0; c < chunks.size(); ++c)
    for (const auto& g : chunks[c]->tied_gradients()) out.push_back(Copy{c, g});
  return out;
}

bool TiedEmbeddings::needs_group(const std::vector<StageModel*>& chunks) {
  return copies_of(chunks).size() == 1;
}

BucketLayout TiedEmbeddings::layout_of(const std::vector<StageModel*>& chunks) {
  const auto copies = copies_of(chunks);
  if (copies.empty()) return {};
  return {BucketShape{copies.front().gradient.span.count, copies.front().gradient.span.dtype}};
}

TiedEmbeddings::TiedEmbeddings(std::vector<StageModel*> chunks,
                               std::unique_ptr<GradientAllReduce> group)
    : chunks_(std::move(chunks)), copies_(copies_of(chunks_)), group_(std::move(group)) {
  if (copies_.empty() || copies_.size() > 2)
    throw std::invalid_argument("model.tie_embeddings: this stage holds " +
                                std::to_string(copies_.size()) + " copies of the tied tensor");
  if ((copies_.size() == 1) != static_cast<bool>(group_))
    throw std::invalid_argument(copies_.size() == 1
                                    ? "model.tie_embeddings: one copy here and no group to sum with"
                                    : "model.tie_embeddings: both copies here, yet a group given");
}

void TiedEmbeddings::sum() {
  // Spans fetched now: a CPU model's gradient tensors may be other allocations by now.
  copies_ = copies_of(chunks_);
  if (copies_.size() == 2) {
    // The copies may sit in two chunks, each computing on a stream of its own (a V-shaped
    // schedule's first rank): the sum, on the first chunk's stream, must follow both
    // chunks' last gradient kernels, and the second chunk's norm and optimizer step must
    // follow the sum. Host waits order both; the report waits for the norm right after.
    StageModel& first = *chunks_[copies_[0].chunk];
    StageModel& second = *chunks_[copies_[1].chunk];
    second.synchronize();
    sum_in_place(copies_[0].gradient.span, copies_[1].gradient.span, first.compute_stream());
    if (&first != &second) first.synchronize();
    return;
  }
  const GradientSpan& span = copies_[0].gradient.span;
  group_->start_after(GradientBucket{0, {span}},
                      chunks_[copies_[0].chunk]->compute_stream())
      ->wait();
}

std::vector<std::pair<std::size_t, std::size_t>> TiedEmbeddings::head_square_params() const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (const auto& c : copies_)
    if (c.gradient.head) out.emplace_back(c.chunk, c.gradient.param);
  return out;
}

}  // namespace conveyor
