#include "actors/worker/share_gradients.hpp"

#include <fmt/format.h>

#include <span>
#include <stdexcept>

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
  const float divisor = static_cast<float>(shares_);
  std::size_t at = 0;
  for (auto span : host_gradients(*chunks_[chunk])) {
    for (float& g : span) {
      // ((g_0 + g_1) + …) + g_last: the last share is the one still in the model.
      float sum = kept[0].at(at);
      for (std::size_t s = 1; s < kept.size(); ++s) sum += kept[s][at];
      g = (sum + g) / divisor;
      ++at;
    }
  }
  if (at != kept[0].size())
    throw std::logic_error(fmt::format("gradient shares: chunk {} has {} gradient elements, "
                                       "its first share {}", chunk, at, kept[0].size()));
  kept.clear();
}

void ShareGradients::clear() {
  for (auto& k : kept_) k.clear();
}

}  // namespace conveyor
