#include "actors/plan/placement.hpp"

#include <stdexcept>

namespace conveyor {

int Placement::model_stages() const {
  int n = 0;
  for (const auto& r : ranks) n += static_cast<int>(r.chunks.size());
  return n;
}

const ChunkPlacement& Placement::chunk_of(int model_stage) const {
  for (const auto& r : ranks)
    for (const auto& c : r.chunks)
      if (c.model_stage == model_stage) return c;
  throw std::out_of_range("placement: no chunk holds model stage " + std::to_string(model_stage));
}

std::vector<std::string> slice_layer_names(const StageSlice& slice) {
  std::vector<std::string> names;
  if (slice.has_embedding) names.emplace_back("embedding");
  for (int b = slice.first_block; b < slice.end_block(); ++b) {
    const bool attention = slice.holds_attention(b), mlp = slice.holds_mlp(b);
    names.push_back("block " + std::to_string(b) + (attention && mlp ? "" : attention ? " attention" : " mlp"));
  }
  if (slice.has_head) names.emplace_back("head");
  return names;
}

}  // namespace conveyor
