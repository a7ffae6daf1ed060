#include "kernels/cpu/fp8.hpp"
#include "kernels/cpu/fp8_scaling.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8_delayed_scale.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

// state: [0] step amax, [1] scale, [2] finite amaxes recorded (an int), [3 .. 3 + length)
// the last `length` of them, a ring. As AmaxHistory: a non-finite amax is not recorded,
// and no record at all gives scale 1.
__global__ void roll_kernel(float* state, int length, float max_finite) {
  const float step = state[0];
  int* recorded = reinterpret_cast<int*>(state + 2);
  float* history = state + 3;
  if (isfinite(step)) history[(*recorded)++ % length] = step;
  const int n = min(*recorded, length);
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = fmaxf(m, history[i]);
  state[1] = n == 0 ? 1.0f : max_finite / fmaxf(m, cpu::kMinAmax);
  state[0] = 0.0f;
}

// Non-negative floats (and NaN) order as their bits: fp8_amax's integer max.
__device__ void record(float* step_amax, float amax) {
  atomicMax(reinterpret_cast<unsigned*>(step_amax), __float_as_uint(amax) & 0x7fffffffu);
}

__global__ void finish_kernel(float* dequant, const float* cast_amax, const float* scale,
                              float* step_amax) {
  const float a = *cast_amax;
  *dequant = isfinite(a) ? 1.0f / *scale : __int_as_float(0x7fc00000);
  record(step_amax, a);
}

__global__ void record_kernel(float* step_amax, const float* cast_amax) {
  record(step_amax, *cast_amax);
}

}  // namespace

DelayedScale::DelayedScale(int history, Fp8Kind kind, int device, cudaStream_t stream)
    : state_(sizeof(float) * (3 + static_cast<std::size_t>(history)), device, stream,
             "FP8 amax history"),
      kind_(kind),
      length_(history) {
  require(history >= 1, "DelayedScale", "history " + std::to_string(history) + " < 1");
  CUDA_CHECK(cudaMemsetAsync(state_.data(), 0, state_.bytes(), stream));
}

void DelayedScale::roll(cudaStream_t stream) {
  roll_kernel<<<1, 1, 0, stream>>>(state_.as<float>(), length_,
                                   static_cast<float>(fp8_format(kind_).max_finite));
  CUDA_CHECK_LAUNCH();
  ++steps_;
}

void finish_delayed_cast(float* dequant, const float* cast_amax, const DelayedScale& slot,
                         cudaStream_t stream) {
  finish_kernel<<<1, 1, 0, stream>>>(dequant, cast_amax, slot.scale(), slot.step_amax());
  CUDA_CHECK_LAUNCH();
}

void record_amax(const DelayedScale& slot, const float* cast_amax, cudaStream_t stream) {
  record_kernel<<<1, 1, 0, stream>>>(slot.step_amax(), cast_amax);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
