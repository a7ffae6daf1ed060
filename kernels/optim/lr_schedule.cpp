#include "kernels/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace conveyor {

// at(step) for step < warmup:  lr * (step + 1) / warmup  (reaches lr at warmup - 1)
// then cosine over [warmup, total]: lr_min + (lr - lr_min) * (1 + cos(pi * progress)) / 2,
// progress = (step - warmup) / (total - warmup), so at(warmup) = lr and at(total) = lr_min;
// lr_min for every later step (and for every step >= warmup when total <= warmup).
double LrSchedule::at(std::int64_t step) const {
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const std::int64_t decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 0 || step >= total_steps) return lr_min;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps);
  return lr_min + (lr - lr_min) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace conveyor
