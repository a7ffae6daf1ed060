#pragma once
#include <cstdint>

namespace conveyor {

/// Linear warm-up from lr/warmup to lr over `warmup_steps`, then cosine decay to
/// `lr_min` at `total_steps`. Steps count from 0.
struct LrSchedule {
  double lr = 1e-3;
  double lr_min = 1e-4;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;

  double at(std::int64_t step) const;
};

}  // namespace conveyor
