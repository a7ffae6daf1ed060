#pragma once
// The small whole GPT that the worker's gradient tests train (replica_gradients_test,
// share_gradients_test), and its token batches: a seed gives the same ids in both.
#include <cstdint>
#include <random>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/stage_slice.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor::testing {

inline const GptConfig kWorkerModel{2, 32, 4, 16, 64};
inline const StageSlice kWorkerWhole{0, 2, true, true};

/// A (2, seq_len) batch of ids drawn from `seed`.
inline Tensor worker_random_ids(std::uint32_t seed) {
  Tensor t = Tensor::zeros(Shape{2, kWorkerModel.seq_len}, DType::i32);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, static_cast<int>(kWorkerModel.vocab) - 1);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = id(rng);
  return t;
}

}  // namespace conveyor::testing
