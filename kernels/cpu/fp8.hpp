#pragma once
// FP8 numbers as Hopper's tensor cores read them (OCP 8-bit floating point): the CPU
// reference that the FP8 kernels (precision.matmul: fp8) are compared with.
//   E4M3 ("e4m3fn"): 4 exponent bits (bias 7), 3 mantissa bits, no infinities; the one NaN
//                    pattern is S.1111.111; largest finite 448, smallest subnormal 2^-9.
//                    Activations and weights.
//   E5M2:            5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (infinities,
//                    NaNs); largest finite 57344, smallest subnormal 2^-16. Gradients.
// Conversion from float is what CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does:
// round to nearest, ties to even; a magnitude beyond the largest finite value (infinity
// included) saturates to it; NaN stays NaN. A scaled tensor is stored as
// to_fp8(x * scale) with the product rounded to float first (the kernels multiply in
// fp32), and read back as from_fp8(q) / scale.
#include <cmath>
#include <cstdint>
#include <limits>

namespace conveyor::cpu {

struct Fp8Format {
  int exponent_bits, mantissa_bits, bias;
  bool has_infinity;      // E5M2; E4M3 spends its top exponent on finite values
  double max_finite;      // 448 or 57344
  const char* name;
};

inline constexpr Fp8Format kE4M3{4, 3, 7, false, 448.0, "e4m3"};
inline constexpr Fp8Format kE5M2{5, 2, 15, true, 57344.0, "e5m2"};

/// The value of FP8 bits `code` in format `f` (NaN for a NaN pattern, ±inf for E5M2's).
inline float fp8_to_float(std::uint8_t code, const Fp8Format& f) {
  const bool negative = (code & 0x80) != 0;
  const int exp_field = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << f.exponent_bits) - 1;
  double v;
  if (f.has_infinity && exp_field == top) {
    v = mantissa == 0 ? std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_infinity && exp_field == top && mantissa == (1 << f.mantissa_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp_field == 0) {  // subnormal: mantissa * 2^(1 - bias - M)
    v = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(mantissa + (1 << f.mantissa_bits)),
                   exp_field - f.bias - f.mantissa_bits);
  }
  return static_cast<float>(negative ? -v : v);
}

/// `x` rounded to format `f` (nearest, ties to even, saturating), as bits.
inline std::uint8_t float_to_fp8(float x, const Fp8Format& f) {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const int top = (1 << f.exponent_bits) - 1;
  if (std::isnan(x))  // E4M3's only NaN; E5M2's quiet NaN with the top mantissa bit
    return static_cast<std::uint8_t>(
        sign | (f.has_infinity ? (top << f.mantissa_bits) | (1 << (f.mantissa_bits - 1))
                               : 0x7f));
  const double a = std::min(std::fabs(static_cast<double>(x)), f.max_finite);
  if (a == 0.0) return sign;
  // The spacing of representable values at a: 2^(e - M) in a normal binade [2^e, 2^(e+1)),
  // 2^(1 - bias - M) among subnormals. a / quantum is exact (a power-of-two scaling), and
  // nearbyint rounds it half to even in the default rounding mode.
  int e = 0;
  (void)std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): a in [2^(e-1), 2^e)
  const int binade = std::max(e - 1, 1 - f.bias);
  const int quantum_exp = binade - f.mantissa_bits;
  const double units = std::nearbyint(std::ldexp(a, -quantum_exp));  // a in quanta
  if (units == 0.0) return sign;
  // Rounding may carry into the next binade (units == 2^(M+1)); the fields below follow.
  double q = std::ldexp(units, quantum_exp);
  q = std::min(q, f.max_finite);
  int qe = 0;
  (void)std::frexp(q, &qe);
  int exp_field = qe - 1 + f.bias;
  int mantissa;
  if (exp_field <= 0) {  // subnormal
    exp_field = 0;
    mantissa = static_cast<int>(std::ldexp(q, f.bias - 1 + f.mantissa_bits));
  } else {
    mantissa = static_cast<int>(std::ldexp(q, f.mantissa_bits - (qe - 1))) - (1 << f.mantissa_bits);
  }
  return static_cast<std::uint8_t>(sign | (exp_field << f.mantissa_bits) | mantissa);
}

/// x rounded through format `f` and back: what a kernel that stores FP8 then reads it sees.
inline float round_to_fp8(float x, const Fp8Format& f) { return fp8_to_float(float_to_fp8(x, f), f); }

/// A scaled tensor's element: stored as float_to_fp8(x * scale) (the product in fp32),
/// read as the stored value / scale.
inline std::uint8_t quantize_fp8(float x, float scale, const Fp8Format& f) {
  return float_to_fp8(x * scale, f);
}
inline float dequantize_fp8(std::uint8_t code, float scale, const Fp8Format& f) {
  return fp8_to_float(code, f) / scale;
}

}  // namespace conveyor::cpu
