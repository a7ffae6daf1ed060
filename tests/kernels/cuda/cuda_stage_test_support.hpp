#pragma once
// What the CUDA stage-model tests share: the small GPT they build (every GEMM dimension a
// multiple of 8), the model options, and the skip when the device is missing.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cstdint>

#include "kernels/cuda/model/cuda_stage_model.hpp"
#include "kernels/model/gpt_config.hpp"
#include "kernels/model/stage_slice.hpp"

/// Returns from the test case with "skipped: no GPU d" when cuda:d is not there.
#define CONVEYOR_REQUIRE_CUDA_DEVICE(d)          \
  do {                                           \
    if (!::conveyor::cuda_device_available(d)) { \
      MESSAGE("skipped: no GPU " << (d));        \
      return;                                    \
    }                                            \
  } while (0)

namespace conveyor::cuda_testing {

// C = 128, 2 heads of 64, T = 64, V = 512, B = 2: every GEMM dimension a multiple of 8.
inline const GptConfig kConfig{/*layers=*/2, /*d_model=*/128, /*heads=*/2, /*seq_len=*/64,
                               /*vocab=*/512};
inline const StageSlice kFull{0, 2, true, true};
inline constexpr std::uint64_t kSeed = 1234;
inline constexpr std::int64_t kB = 2, kT = 64;

inline CudaStageOptions on_device(int device, bool master_fp32 = true) {
  CudaStageOptions o;
  o.device = device;
  o.master_fp32 = master_fp32;
  return o;
}

}  // namespace conveyor::cuda_testing
#endif
