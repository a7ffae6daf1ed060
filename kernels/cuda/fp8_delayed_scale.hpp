#pragma once
// One tensor slot's delayed FP8 scale on the device (precision.fp8_scaling delayed, as
// Transformer Engine's DelayedScaling with margin 0 and "max" over the history;
// kernels/cpu/fp8_scaling.hpp's AmaxHistory is the reference): the casts of a step use the
// scale made from the amaxes of the last `history` steps, and record their own amaxes into
// the step's; roll() ends the step, adding the step's amax to the history and making the
// next scale. A slot is, e.g., "the input of block 3's fc1": every micro-batch's cast of
// that tensor in a step shares its scale.
// What must hold: all of it on the device, in stream order, no host sync; the recorded
// amax is an order-free integer max (casts on the weight-gradient stream record into the
// same slot), so runs repeat bit for bit; a non-finite amax is not recorded (the CPU
// reference refuses it) and the cast that saw it hands its GEMM a NaN dequantization
// factor, so the overflow reaches the NaN policy (fault.on_nan) instead of saturating away.
#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/fp8_cast.hpp"

namespace conveyor {

class DelayedScale {
 public:
  DelayedScale() = default;
  /// Zero history; allocated on `stream`. REQUIRES: history >= 1.
  DelayedScale(int history, Fp8Kind kind, int device, cudaStream_t stream);

  Fp8Kind kind() const { return kind_; }
  /// Steps ended so far. Before the first roll the slot has no scale: its casts scale
  /// dynamically (and record their amax).
  int steps() const { return steps_; }
  /// The scale this step's casts use, and the step's amax they record into (device).
  const float* scale() const { return state_.as<float>() + 1; }
  float* step_amax() const { return state_.as<float>(); }

  /// Ends the step on `stream`: the step's amax joins the history (when finite), the next
  /// scale is made from the history's largest, the step's amax is reset.
  void roll(cudaStream_t stream);

 private:
  DeviceBuffer state_;  // step amax, scale, records (int), history[length] (a ring)
  Fp8Kind kind_ = Fp8Kind::e4m3;
  int length_ = 1;
  int steps_ = 0;
};

/// One cast's bookkeeping (device floats): its own amax `cast_amax` was written by
/// cast_transpose_to_fp8_with_amax with `slot`'s scale; this records it into the slot's
/// step amax and writes the cast's dequantization factor, 1 / scale, or NaN when the
/// cast's amax is not finite.
void finish_delayed_cast(float* dequant, const float* cast_amax, const DelayedScale& slot,
                         cudaStream_t stream);

/// Records a dynamically scaled cast's amax into `slot`'s step amax (a slot's first step).
void record_amax(const DelayedScale& slot, const float* cast_amax, cudaStream_t stream);

}  // namespace conveyor
