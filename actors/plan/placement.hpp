#pragma once
// Where each piece of the model runs: the pipeline is cut into model stages
// (ranks × chunks per rank); each model stage gets a contiguous range of half blocks
// (kernels/model/stage_slice.hpp), the first also the embedding, the last also the final
// norm, LM head and loss.
// Pure logic: no CAF.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model/stage_slice.hpp"
#include "kernels/tensor/device.hpp"

namespace conveyor {

struct ChunkPlacement {
  int model_stage = 0;  // position in the model, 0 = embedding end
  int rank = 0;         // the pipeline stage (device) that runs it
  int chunk = 0;        // which of that rank's chunks it is
  StageSlice slice;
};

struct RankPlacement {
  int rank = 0;
  int replica = 0;
  Device device;
  std::vector<ChunkPlacement> chunks;  // by chunk index
};

struct Placement {
  std::vector<RankPlacement> ranks;
  int model_stages() const;
  /// The chunk that holds `model_stage`.
  const ChunkPlacement& chunk_of(int model_stage) const;
};

/// Builds the placement from half blocks per model stage (sched::uniform_partition for the
/// uniform split, sched::halves_of_blocks for whole blocks) and the schedule's mapping of
/// (rank, chunk) to model stage.
/// REQUIRES: model_stage_of(rank, chunk) is a bijection onto 0..ranks*chunks-1.
template <class ModelStageOf>
Placement make_placement(const std::vector<int>& halves_per_model_stage, int ranks, int chunks,
                         ModelStageOf model_stage_of);

/// Names of what a slice holds, in model order: "embedding", "block 0", …, "head"; a block
/// of which the slice holds one half is "block 5 attention" or "block 5 mlp".
std::vector<std::string> slice_layer_names(const StageSlice& slice);

// ---- implementation

template <class ModelStageOf>
Placement make_placement(const std::vector<int>& halves_per_model_stage, int ranks, int chunks,
                         ModelStageOf model_stage_of) {
  const int total = ranks * chunks;
  std::vector<int> first_half(total + 1, 0);
  for (int s = 0; s < total; ++s) first_half[s + 1] = first_half[s] + halves_per_model_stage.at(s);
  Placement p;
  for (int r = 0; r < ranks; ++r) {
    RankPlacement rp;
    rp.rank = r;
    rp.device = Device::cpu();
    for (int c = 0; c < chunks; ++c) {
      ChunkPlacement cp;
      cp.model_stage = model_stage_of(r, c);
      cp.rank = r;
      cp.chunk = c;
      cp.slice = StageSlice::of_halves(first_half.at(cp.model_stage),
                                       halves_per_model_stage.at(cp.model_stage),
                                       cp.model_stage == 0, cp.model_stage == total - 1);
      rp.chunks.push_back(cp);
    }
    p.ranks.push_back(rp);
  }
  return p;
}

}  // namespace conveyor
