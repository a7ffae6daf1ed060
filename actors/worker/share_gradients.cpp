#include "actors/worker/share_gradients.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <numeric>
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
    : shares_(shares), chunks_(std::move(chunks)), kept_(chunks_.size()), gathered_(chunks_.size()) {
  if (shares_ < 1) throw std::invalid_argument("gradient shares: fewer than 1 share");
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
  // The kept shares are flat in gradients() order; the last is the one still in the model.
  combine_shares(chunk, shares_, [&](int s, std::size_t flat, const float* at) {
    return s + 1 < shares_ ? kept[static_cast<std::size_t>(s)].data() + flat : at;
  });
  kept.clear();
}

double ShareGradients::gather_and_combine(std::size_t chunk, GradientAllReduce& group,
                                          const std::vector<int>& replica_shares) {
  const auto began = std::chrono::steady_clock::now();
  auto& kept = kept_.at(chunk);
  const int rank = group.group().rank;
  if (static_cast<int>(replica_shares.size()) != group.group().size ||
      replica_shares.at(static_cast<std::size_t>(rank)) != shares_ ||
      static_cast<int>(kept.size()) != shares_ - 1)
    throw std::logic_error(fmt::format("gradient shares: chunk {} gathered with {} of {} shares kept on rank {} of "
                                       "{}, the replicas holding [{}]",
                                       chunk, kept.size() + 1, shares_, rank, group.group().size,
                                       fmt::join(replica_shares, ", ")));
  // Every configured replica's share, in configured order: rank after rank, each rank's
  // shares in a row (configured_shares makes them contiguous, actors/plan/replica_placement.hpp).
  const std::size_t elements = flat_size(chunk);
  const int configured = std::accumulate(replica_shares.begin(), replica_shares.end(), 0);
  const int first = std::accumulate(replica_shares.begin(), replica_shares.begin() + rank, 0);
  // Kept from step to step: its pages are not faulted in again every step.
  auto& all = gathered_.at(chunk);
  all.resize(static_cast<std::size_t>(configured) * elements);
  float* mine = all.data() + static_cast<std::size_t>(first) * elements;
  for (const auto& k : kept) mine = std::copy(k.begin(), k.end(), mine);
  for (auto span : host_gradients(*chunks_[chunk])) mine = std::copy(span.begin(), span.end(), mine);
  kept.clear();
  std::vector<std::size_t> counts;
  for (int n : replica_shares) counts.push_back(static_cast<std::size_t>(n) * elements);
  group.all_gather({GradientBuffer{all.data(), all.size(), DType::f32}}, counts);
  combine_shares(chunk, configured, [&](int s, std::size_t flat, const float*) {
    return all.data() + static_cast<std::size_t>(s) * elements + flat;
  });
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
}

std::size_t ShareGradients::flat_size(std::size_t chunk) const {
  std::size_t total = 0;
  for (auto span : host_gradients(*chunks_.at(chunk))) total += span.size();
  return total;
}

void ShareGradients::combine_shares(std::size_t chunk, int n, const ShareAt& share_at) {
  // The group adds bucket by bucket, each element in the order of its place in its
  // bucket's ring (gloo_ring_order.hpp); share_at gives each share's run, flat in
  // gradients() order.
  StageModel& model = *chunks_[chunk];
  const auto grads = host_gradients(model);
  std::vector<std::size_t> starts;  // of each gradient tensor in the flat order
  std::size_t total = 0;
  for (auto span : grads) {
    starts.push_back(total);
    total += span.size();
  }
  const float divisor = static_cast<float>(n);
  std::vector<std::vector<int>> orders;  // by chunk of the ring: the shares' order
  for (int c = 0; c < n; ++c) orders.push_back(gloo_ring_order(n, c));
  std::vector<const float*> share(static_cast<std::size_t>(n));  // each share's run
  std::size_t covered = 0;
  for (const auto& bucket : model.gradient_buckets()) {
    std::size_t elements = 0;
    for (const auto& span : bucket) elements += span.count;
    if (elements == 0) continue;
    const GlooRingLayout ring = gloo_ring_layout(elements, n);
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
        for (int s = 0; s < n; ++s) share[static_cast<std::size_t>(s)] = share_at(s, starts[t] + offset, at);
        if (n == 2) {
          const float* a = share[0];
          const float* b = share[1];
          for (std::size_t i = 0; i < run; ++i) at[i] = (a[i] + b[i]) / divisor;
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
}

void ShareGradients::clear() {
  for (auto& k : kept_) k.clear();
}

}  // namespace conveyor
