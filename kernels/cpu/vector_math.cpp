#include "kernels/cpu/vector_math.hpp"

#include <immintrin.h>

#include <stdexcept>
#include <string>

#include "kernels/cpu/blas_core.hpp"

// libmvec's entry points, named by the x86 vector function ABI: b = SSE (4 lanes),
// d = AVX2 (8), e = AVX-512 (16); N = unmasked, v = one vector argument.
extern "C" {
__m128 _ZGVbN4v_tanhf(__m128);
__m256 _ZGVdN8v_tanhf(__m256);
__m512 _ZGVeN16v_tanhf(__m512);
__m128 _ZGVbN4v_expf(__m128);
__m256 _ZGVdN8v_expf(__m256);
__m512 _ZGVeN16v_expf(__m512);
}

namespace conveyor::cpu {
namespace {

using ArrayFn = void (*)(float*, const float*, std::int64_t);

// The lanes that do not fill a vector go through the same vector function, padded, so every
// element of an array is rounded by one implementation whatever its position.
// (A macro: the intrinsics must expand inside each target-attributed function; a template
// or lambda would not inherit the target and could not inline them.)
#define CONVEYOR_VECTOR_LOOP(lanes, load, store, fn)                      \
  std::int64_t i = 0;                                                     \
  for (; i + (lanes) <= n; i += (lanes)) store(y + i, fn(load(x + i)));   \
  if (i < n) {                                                            \
    alignas(64) float pad[lanes] = {};                                    \
    for (std::int64_t j = i; j < n; ++j) pad[j - i] = x[j];               \
    store(pad, fn(load(pad)));                                            \
    for (std::int64_t j = i; j < n; ++j) y[j] = pad[j - i];               \
  }

void tanh_sse(float* y, const float* x, std::int64_t n) {
  CONVEYOR_VECTOR_LOOP(4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_tanhf)
}
void exp_sse(float* y, const float* x, std::int64_t n) {
  CONVEYOR_VECTOR_LOOP(4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_expf)
}
__attribute__((target("avx2,fma"))) void tanh_avx2(float* y, const float* x, std::int64_t n) {
  CONVEYOR_VECTOR_LOOP(8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_tanhf)
}
__attribute__((target("avx2,fma"))) void exp_avx2(float* y, const float* x, std::int64_t n) {
  CONVEYOR_VECTOR_LOOP(8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_expf)
}
__attribute__((target("avx512f"))) void tanh_avx512(float* y, const float* x, std::int64_t n) {
  CONVEYOR_VECTOR_LOOP(16, _mm512_loadu_ps, _mm512_storeu_ps, _ZGVeN16v_tanhf)
}
__attribute__((target("avx512f"))) void exp_avx512(float* y, const float* x, std::int64_t n) {
  CONVEYOR_VECTOR_LOOP(16, _mm512_loadu_ps, _mm512_storeu_ps, _ZGVeN16v_expf)
}
#undef CONVEYOR_VECTOR_LOOP

struct Functions {
  ArrayFn tanh;
  ArrayFn exp;
};

Functions functions(VectorMath variant) {
  switch (variant) {
    case VectorMath::sse: return {tanh_sse, exp_sse};
    case VectorMath::avx2: return {tanh_avx2, exp_avx2};
    case VectorMath::avx512: return {tanh_avx512, exp_avx512};
  }
  throw std::logic_error("vector math: unknown variant");
}

bool supported(VectorMath variant) {
  const CpuVectorUnits units = cpu_vector_units();
  switch (variant) {
    case VectorMath::sse: return true;  // every x86-64 CPU
    case VectorMath::avx2: return units.avx2_fma;
    case VectorMath::avx512: return units.avx512;
  }
  return false;
}

const Functions& chosen() {
  static const Functions f = functions(vector_math());
  return f;
}

Functions checked(VectorMath variant) {
  if (!supported(variant))
    throw std::invalid_argument("vector math: this CPU cannot run the " +
                                std::string(name(variant)) + " variant");
  return functions(variant);
}

}  // namespace

std::string_view name(VectorMath variant) {
  switch (variant) {
    case VectorMath::sse: return "sse";
    case VectorMath::avx2: return "avx2";
    case VectorMath::avx512: return "avx512";
  }
  return "unknown";
}

VectorMath vector_math() {
  static const VectorMath v = supported(VectorMath::avx512) ? VectorMath::avx512
                              : supported(VectorMath::avx2) ? VectorMath::avx2
                                                            : VectorMath::sse;
  return v;
}

std::vector<VectorMath> supported_vector_math() {
  std::vector<VectorMath> out;
  for (auto v : {VectorMath::sse, VectorMath::avx2, VectorMath::avx512})
    if (supported(v)) out.push_back(v);
  return out;
}

void vector_tanh(float* y, const float* x, std::int64_t n) { chosen().tanh(y, x, n); }
void vector_exp(float* y, const float* x, std::int64_t n) { chosen().exp(y, x, n); }
void vector_tanh(VectorMath variant, float* y, const float* x, std::int64_t n) {
  checked(variant).tanh(y, x, n);
}
void vector_exp(VectorMath variant, float* y, const float* x, std::int64_t n) {
  checked(variant).exp(y, x, n);
}

}  // namespace conveyor::cpu
