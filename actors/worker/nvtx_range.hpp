#pragma once
// An NVTX range around each action a stage executes, named as the schedule names it
// ("1F3", "0W5") with its step, so Nsight Systems shows conveyor's actions on the stage's
// thread above the CUDA kernels they launched. Active only in CUDA builds and only when a
// tool has injected itself into NVTX (Nsight Systems sets NVTX_INJECTION64_PATH for the
// process it profiles): otherwise nothing is formatted and nothing is called.
#include <cstdint>
#include <cstdlib>
#include <string>

#if CONVEYOR_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

#include "actors/plan/schedule/action.hpp"

namespace conveyor {

class NvtxRange {
 public:
  NvtxRange(const sched::Action& action, std::int64_t step) {
#if CONVEYOR_WITH_CUDA
    if (!enabled()) return;
    const std::string name = action.str() + " step " + std::to_string(step);
    nvtxRangePushA(name.c_str());
    pushed_ = true;
#else
    (void)action;
    (void)step;
#endif
  }
  ~NvtxRange() {
#if CONVEYOR_WITH_CUDA
    if (pushed_) nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  static bool enabled() {
    static const bool on = std::getenv("NVTX_INJECTION64_PATH") != nullptr;
    return on;
  }
  bool pushed_ = false;
};

}  // namespace conveyor
