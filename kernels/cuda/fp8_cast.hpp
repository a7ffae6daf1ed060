#pragma once
// Casts to FP8 on the device (precision.matmul: fp8; kernels/cpu/fp8.hpp is the reference):
// out[i] = fp8(x[i] * scale), the product in fp32, converted by the hardware's saturating
// round-to-nearest-even (__nv_cvt_float_to_fp8 with __NV_SATFINITE); and the amax that a
// tensor's scale is made from. These are the stand-alone kernels; the casts fused into the
// kernels that produce the data are the fast path, and these are their reference.
// Invariant: out and amax are written with =. The amax is max |x| (NaN when any x is NaN),
// exact and independent of the order of the threads: deterministic.
#include <cstdint>

#include "kernels/cpu/fp8.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor {

enum class Fp8Kind { e4m3, e5m2 };

/// The CPU reference's description of a kind (its largest finite value, its bits).
inline const cpu::Fp8Format& fp8_format(Fp8Kind kind) {
  return kind == Fp8Kind::e4m3 ? cpu::kE4M3 : cpu::kE5M2;
}

/// `scale` lives on the device (a delayed scale is produced there); one float.
void cast_to_fp8(std::uint8_t* out, const float* x, std::int64_t n, const float* scale,
                 Fp8Kind kind, cudaStream_t stream);
void cast_to_fp8(std::uint8_t* out, const bf16* x, std::int64_t n, const float* scale,
                 Fp8Kind kind, cudaStream_t stream);

/// out = fp8(x * scale) (rows, cols) and out_t its transpose (cols, rows), the same codes,
/// in one pass over x (fp8_gemm.hpp's backward GEMMs read the transposed copies); either
/// output may be null.
void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, const bf16* x, int rows,
                           int cols, const float* scale, Fp8Kind kind, cudaStream_t stream);

/// cast_transpose_to_fp8, and amax[0] = max |x| over the tensor in the same pass (delayed
/// scaling casts with a scale known before the data, and records the data's amax).
void cast_transpose_to_fp8_with_amax(std::uint8_t* out, std::uint8_t* out_t, const bf16* x,
                                     int rows, int cols, const float* scale, float* amax,
                                     Fp8Kind kind, cudaStream_t stream);

/// amax[0] = max |x[i]| over n elements (0 for n = 0).
void fp8_amax(float* amax, const bf16* x, std::int64_t n, cudaStream_t stream);

/// Dynamic scaling (kernels/cpu/fp8_scaling.hpp's fp8_scale_for, on the device, one thread):
/// scale[0] = max_finite(kind) / max(amax[0], kMinAmax), dequant[0] = 1 / scale[0]. A
/// non-finite amax (an overflow upstream) gives scale 1 and dequant NaN: the GEMM that
/// reads the tensor then writes NaN, so the overflow reaches the loss or the gradient norm
/// and the NaN policy (fault.on_nan) sees it, where saturating casts would hide it.
void fp8_scale_from_amax(float* scale, float* dequant, const float* amax, Fp8Kind kind,
                         cudaStream_t stream);

}  // namespace conveyor
