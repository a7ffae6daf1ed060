#pragma once
// tanh and exp over float arrays in SIMD registers: glibc's vector math library (libmvec,
// at most 4 ulp from the exact value) in the widest variant this CPU runs — 16 lanes with
// AVX-512, 8 with AVX2, 4 with SSE. The project builds for plain x86-64, so a compiled
// expression (Eigen's tanh, auto-vectorised loops) gets SSE only; GELU and the softmax
// exponentials were ~18% of a tiny.yaml step that way. The variant is chosen once per
// process (every call of a run uses the same one, so the same bits), by the CPU's vector
// units; a machine with other units may round differently in the last bits.
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

namespace conveyor::cpu {

enum class VectorMath { sse, avx2, avx512 };

/// "sse", "avx2" or "avx512".
std::string_view name(VectorMath variant);

/// The variant this process uses: the widest the CPU supports.
VectorMath vector_math();

/// Every variant this CPU can run (for tests: each must meet the same accuracy).
std::vector<VectorMath> supported_vector_math();

/// y[i] = tanh(x[i]) for i < n. y may be x (element-wise: in place is safe).
void vector_tanh(float* y, const float* x, std::int64_t n);
/// y[i] = exp(x[i]) for i < n. y may be x.
void vector_exp(float* y, const float* x, std::int64_t n);

/// The same with a chosen variant, which must be one of supported_vector_math().
void vector_tanh(VectorMath variant, float* y, const float* x, std::int64_t n);
void vector_exp(VectorMath variant, float* y, const float* x, std::int64_t n);

/// v[i] = tanh(v[i]) / exp(v[i]) for i < n, for the kernels' templates: float in SIMD,
/// double with std::tanh / std::exp (the reference the float kernels are tested against).
template <class Real>
void tanh_in_place(Real* v, std::int64_t n) {
  if constexpr (std::is_same_v<Real, float>)
    vector_tanh(v, v, n);
  else
    for (std::int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
}
template <class Real>
void exp_in_place(Real* v, std::int64_t n) {
  if constexpr (std::is_same_v<Real, float>)
    vector_exp(v, v, n);
  else
    for (std::int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]);
}

}  // namespace conveyor::cpu
