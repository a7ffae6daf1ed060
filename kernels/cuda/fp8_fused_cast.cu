// The element-wise producers as fp8_cast_tiles.cuh Sources; see fp8_fused_cast.hpp.
#include <string>

#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8_cast_tiles.cuh"
#include "kernels/cuda/fp8_fused_cast.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/swiglu.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;
using Op = Fp8Producer::Op;

// 8 bf16 at p (16-byte aligned) as floats.
__device__ __forceinline__ void load8(const bf16* p, float v[8]) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const unsigned w[4] = {q.x, q.y, q.z, q.w};
  for (int j = 0; j < 4; ++j) v[2 * j] = low_bf16(w[j]), v[2 * j + 1] = high_bf16(w[j]);
}

// Rounds 8 floats to bf16, stores them at y (16-byte aligned; null: not stored) and hands
// them out packed.
__device__ __forceinline__ void store8(bf16* y, const float v[8], unsigned w[4]) {
  for (int j = 0; j < 4; ++j) w[j] = bf16_bits(v[2 * j]) | bf16_bits(v[2 * j + 1]) << 16;
  if (y) *reinterpret_cast<uint4*>(y) = make_uint4(w[0], w[1], w[2], w[3]);
}

// The producer's element (r, c) in fp32, before its rounding to bf16; the Source below
// rounds, stores and hands out the bf16.
template <Op kOp>
struct Producer {
  bf16* y;
  const bf16* a;
  const bf16* b;
  int cols;

  __device__ float compute(int r, int c) const {
    const std::int64_t at = std::int64_t{r} * cols + c;
    if constexpr (kOp == Op::gelu) {
      return gelu_value(to_float(a[at]));
    } else if constexpr (kOp == Op::gelu_backward) {
      return gelu_input_grad(to_float(b[at]), to_float(a[at]));
    } else if constexpr (kOp == Op::swiglu) {
      const std::int64_t g = std::int64_t{r} * 2 * cols + c;
      return swiglu_value(to_float(a[g]), to_float(a[g + cols]));
    } else {  // swiglu_backward: cols = 2F, y = [d gate | d up]
      const int F = cols / 2;
      const std::int64_t g = std::int64_t{r} * cols + (c < F ? c : c - F);
      const float dy = to_float(a[std::int64_t{r} * F + (c < F ? c : c - F)]);
      const float gate = to_float(b[g]);
      return c < F ? swiglu_gate_grad(gate, to_float(b[g + F]), dy) : swiglu_up_grad(gate, dy);
    }
  }

  __device__ float value(int r, int c) const {
    const bf16 v = to_bf16(compute(r, c));
    if (y) y[std::int64_t{r} * cols + c] = v;
    return to_float(v);
  }

  // REQUIRES (the launcher's check): c a multiple of 8, every row start 16-byte aligned, and
  // for swiglu_backward F a multiple of 8, so the 8 elements are all gate or all up.
  __device__ void values8(int r, int c, unsigned w[4]) const {
    const std::int64_t at = std::int64_t{r} * cols + c;
    float v[8];
    if constexpr (kOp == Op::gelu) {
      load8(a + at, v);
      for (float& x : v) x = gelu_value(x);
    } else if constexpr (kOp == Op::gelu_backward) {
      float x[8];
      load8(a + at, v);
      load8(b + at, x);
      for (int j = 0; j < 8; ++j) v[j] = gelu_input_grad(x[j], v[j]);
    } else if constexpr (kOp == Op::swiglu) {
      float u[8];
      const std::int64_t g = std::int64_t{r} * 2 * cols + c;
      load8(a + g, v);
      load8(a + g + cols, u);
      for (int j = 0; j < 8; ++j) v[j] = swiglu_value(v[j], u[j]);
    } else {
      const int F = cols / 2, k = c < F ? c : c - F;
      const std::int64_t g = std::int64_t{r} * cols + k;
      float gate[8];
      load8(a + std::int64_t{r} * F + k, v);  // dy
      load8(b + g, gate);
      if (c < F) {
        float u[8];
        load8(b + g + F, u);
        for (int j = 0; j < 8; ++j) v[j] = swiglu_gate_grad(gate[j], u[j], v[j]);
      } else {
        for (int j = 0; j < 8; ++j) v[j] = swiglu_up_grad(gate[j], v[j]);
      }
    }
    store8(y ? y + at : nullptr, v, w);
  }
};

bool aligned16(const void* p) { return cast_aligned(p, 16); }

template <Op kOp>
void launch(const Fp8Producer& p, int rows, int cols, std::uint8_t* out, std::uint8_t* out_t,
            const float* scale, unsigned* amax_bits, __nv_fp8_interpretation_t kind,
            cudaStream_t stream) {
  // Row starts stay 16-byte aligned when the row lengths are multiples of 8 elements.
  const int F = kOp == Op::swiglu_backward ? cols / 2 : cols;
  const bool vectorizable = cols % 8 == 0 && F % 8 == 0 && aligned16(p.y) && aligned16(p.a) &&
                            aligned16(p.b);
  launch_cast_transpose_tiles(Producer<kOp>{p.y, p.a, p.b, cols}, vectorizable, out, out_t, rows,
                              cols, scale, kind, amax_bits, stream);
}

void check(const Fp8Producer& p, int rows, int cols) {
  require(rows >= 0 && cols >= 0, "produce_fp8",
          "negative shape " + std::to_string(rows) + " x " + std::to_string(cols));
  require(ceil_div(rows, kCastTile) <= 65535, "produce_fp8",
          "rows " + std::to_string(rows) + " beyond the grid");
  require(p.op != Op::swiglu_backward || cols % 2 == 0, "produce_fp8",
          "swiglu_backward's cols (2F) must be even, got " + std::to_string(cols));
}

}  // namespace

void produce_fp8(const Fp8Producer& p, int rows, int cols, std::uint8_t* out, std::uint8_t* out_t,
                 const float* scale, float* amax, Fp8Kind kind, cudaStream_t stream) {
  check(p, rows, cols);
  require(p.y != nullptr || scale != nullptr, "produce_fp8",
          "neither the output nor a scale for its codes: nothing would be written");
  if (amax) CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (rows == 0 || cols == 0) return;
  if (!scale) out = out_t = nullptr;
  auto* bits = reinterpret_cast<unsigned*>(amax);
  const auto format = kind == Fp8Kind::e4m3 ? __NV_E4M3 : __NV_E5M2;
  switch (p.op) {
    case Op::gelu: return launch<Op::gelu>(p, rows, cols, out, out_t, scale, bits, format, stream);
    case Op::gelu_backward:
      return launch<Op::gelu_backward>(p, rows, cols, out, out_t, scale, bits, format, stream);
    case Op::swiglu: return launch<Op::swiglu>(p, rows, cols, out, out_t, scale, bits, format, stream);
    case Op::swiglu_backward:
      return launch<Op::swiglu_backward>(p, rows, cols, out, out_t, scale, bits, format, stream);
  }
}

void produce(const Fp8Producer& p, int rows, int cols, cudaStream_t stream) {
  check(p, rows, cols);
  require(p.y != nullptr, "produce", "no output");
  const std::int64_t n = std::int64_t{rows} * cols;
  switch (p.op) {
    case Op::gelu: return gelu_forward(p.y, p.a, n, stream);
    case Op::gelu_backward: return gelu_backward_input(p.y, p.a, p.b, n, stream);
    case Op::swiglu: return swiglu_forward(p.y, p.a, rows, cols, stream);
    case Op::swiglu_backward: return swiglu_backward_input(p.y, p.a, p.b, rows, cols / 2, stream);
  }
}

}  // namespace conveyor
