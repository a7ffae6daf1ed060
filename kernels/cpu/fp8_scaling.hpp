#pragma once
// Per-tensor FP8 scales (precision.fp8_scaling), the CPU reference of what the kernels
// compute on the device:
//   dynamic  the scale of a tensor comes from its own amax, max |x| over its elements
//            (torchao's tensorwise float8 recipe):  scale = max_finite / max(amax, kMinAmax)
//   delayed  from the largest amax of the last `amax_history` steps' tensors in that slot
//            (Transformer Engine's DelayedScaling, margin 0, "max" over the history): the
//            tensor is cast with a scale known before it is produced, and its own amax
//            joins the history for the next step.
// All in fp32, as on the device. A non-finite amax is the overflow the NaN policy acts on
// (fp8_amax_ok); the scale is then left as it was.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "kernels/cpu/fp8.hpp"

namespace conveyor::cpu {

/// Amaxes below this give the scale of this amax: an all-zero tensor must not make an
/// infinite scale.
inline constexpr float kMinAmax = 1e-12f;

/// max |x[i]| over n elements; NaN if any element is NaN (a NaN must not hide in a max).
inline float fp8_amax(const float* x, std::int64_t n) {
  float m = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::max(m, std::fabs(x[i]));
  }
  return m;
}

inline bool fp8_amax_ok(float amax) { return std::isfinite(amax); }

/// The scale that maps `amax` onto the format's largest finite value.
/// REQUIRES: fp8_amax_ok(amax).
inline float fp8_scale_for(float amax, const Fp8Format& f) {
  return static_cast<float>(f.max_finite) / std::max(amax, kMinAmax);
}

/// The amaxes of one tensor slot over the last `length` steps (delayed scaling).
class AmaxHistory {
 public:
  explicit AmaxHistory(std::size_t length) : length_(std::max<std::size_t>(length, 1)) {}

  /// A step's amax; a non-finite one is refused (false) and not recorded.
  bool record(float amax) {
    if (!fp8_amax_ok(amax)) return false;
    history_.push_back(amax);
    if (history_.size() > length_) history_.pop_front();
    return true;
  }

  /// The scale for the next step: from the largest recorded amax, or 1 before any.
  float scale(const Fp8Format& f) const {
    if (history_.empty()) return 1.0f;
    return fp8_scale_for(*std::max_element(history_.begin(), history_.end()), f);
  }

  std::size_t size() const { return history_.size(); }

 private:
  std::size_t length_;
  std::deque<float> history_;
};

}  // namespace conveyor::cpu
