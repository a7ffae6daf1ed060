#include "actors/worker/share_gradients.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <stdexcept>

#include "actors/worker/gloo_ring_order.hpp"

namespace conveyor {
namespace {

// The chunk's gradients as host f32 spans; fetched at every use (a CPU model's gradient
// tensors may be other allocations by then).
std::vector<std::span<float>> host_gradients(StageModel& model) {
  std::vector<std::span<float>> out;
  for (Tensor& g : model.gradients()) {
    if (g.dtype() != DType::f32 || !g.device().is_cpu())
      throw std::invalid_argument(fmt::format(
          "gradient shares need host f32 gradients (CPU stages), got {}", g.describe()));
    out.push_back(g.f32_span());
  }
  return out;
}

}  // namespace

ShareGradients::ShareGradients(int shares, std::vector<StageModel*> chunks)
    : shares_(shares), chunks_(std::move(chunks)), kept_(chunks_.size()) {
  if (shares_ < 2) throw std::invalid_argument("gradient shares: fewer than 2 shares");
  for (StageModel* m : chunks_) host_gradients(*m);  // refuses a GPU model up front
}

void ShareGradients::end_share(std::size_t chunk) {
  auto& kept = kept_.at(chunk);
  if (static_cast<int>(kept.size()) >= shares_ - 1)
    throw std::logic_error(fmt::format("gradient shares: chunk {} ended more than {} shares",
                                       chunk, shares_ - 1));
  std::vector<float> flat;
  for (auto span : host_gradients(*chunks_[chunk])) flat.insert(flat.end(), span.begin(), span.end());
  kept.push_back(std::move(flat));
  chunks_[chunk]->discard_gradients();  // the next share starts from zero, as its replica
}

void ShareGradients::combine(std::size_t chunk) {
  auto& kept = kept_.at(chunk);
  if (static_cast<int>(kept.size()) != shares_ - 1)
    throw std::logic_error(fmt::format("gradient shares: chunk {} combined after {} of {} shares",
                                       chunk, kept.size() + 1, shares_));
  // The kept shares are flat in gradients() order; the group adds bucket by bucket, each
  // element in the order of its place in its bucket's ring (gloo_ring_order.hpp).
  StageModel& model = *chunks_[chunk];
  const auto grads = host_gradients(model);
  std::vector<std::size_t> starts;  // of each gradient tensor in the flat order
  std::size_t total = 0;
  for (auto span : grads) {
    starts.push_back(total);
    total += span.size();
  }
  if (total != kept[0].size())
    throw std::logic_error(fmt::format("gradient shares: chunk {} has {} gradient elements, "
                                       "its first share {}", chunk, total, kept[0].size()));
  const float divisor = static_cast<float>(shares_);
  std::vector<std::vector<int>> orders;  // by chunk of the ring: the shares' order
  for (int c = 0; c < shares_; ++c) orders.push_back(gloo_ring_order(shares_, c));
  std::vector<const float*> share(static_cast<std::size_t>(shares_));  // each share's run
  std::size_t covered = 0;
  for (const auto& bucket : model.gradient_buckets()) {
    std::size_t elements = 0;
    for (const auto& span : bucket) elements += span.count;
    if (elements == 0) continue;
    const GlooRingLayout ring = gloo_ring_layout(elements, shares_);
    const std::size_t chunk_elements = ring.segment_elements * ring.segments_per_rank;
    std::size_t element = 0;  // within the bucket
    for (const auto& span : bucket) {
      auto* at = static_cast<float*>(span.data);
      std::size_t left = span.count;
      while (left > 0) {
        // The gradient tensor this part of the span lies in (a span may cross tensors).
        std::size_t t = 0;
        while (t < grads.size() && !(at >= grads[t].data() && at < grads[t].data() + grads[t].size())) ++t;
        if (t == grads.size())
          throw std::logic_error(fmt::format("gradient shares: chunk {}'s bucket spans memory outside its "
                                             "gradients",
                                             chunk));
        const auto offset = static_cast<std::size_t>(at - grads[t].data());
        // A run within one tensor and one chunk of the ring: one order for all of it.
        const std::size_t run = std::min({left, grads[t].size() - offset,
                                          chunk_elements - element % chunk_elements});
        const auto& order = orders.at(static_cast<std::size_t>(ring.chunk_of(element)));
        const std::size_t flat = starts[t] + offset;
        for (std::size_t s = 0; s < kept.size(); ++s) share[s] = kept[s].data() + flat;
        share.back() = at;  // the last share is the one still in the model
        if (shares_ == 2) {
          const float* a = share[0];
          for (std::size_t i = 0; i < run; ++i) at[i] = (a[i] + at[i]) / divisor;
        } else {
          for (std::size_t i = 0; i < run; ++i)
            at[i] = sum_in_ring_order(order, [&](int r) { return share[static_cast<std::size_t>(r)][i]; }) / divisor;
        }
        element += run;
        at += run;
        left -= run;
        covered += run;
      }
    }
  }
  if (covered != total)
    throw std::logic_error(fmt::format("gradient shares: chunk {}'s buckets cover {} of its {} gradient "
                                       "elements",
                                       chunk, covered, total));
  kept.clear();
}

void ShareGradients::clear() {
  for (auto& k : kept_) k.clear();
}

}  // namespace conveyor
