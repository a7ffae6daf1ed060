// The FP8 linear layers (kernels/cuda/fp8_gemm.hpp) and the cast-transpose that feeds their
// backward GEMMs (fp8_cast.hpp), against the CPU reference on fresh random inputs: the
// casts bit for bit (kernels/cpu/fp8.hpp), the GEMMs against double-precision products of
// the very FP8 values dequantized. Tolerances (scaled_error): 1e-2 for bf16 results (their
// rounding, 2^-9 relative), 1e-3 for fp32 weight gradients (the FP8 tensor cores' chunked
// accumulation); a
// wrong layout, scale or transpose gives errors of order 1.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/fp8.hpp"
#include "kernels/cpu/fp8_scaling.hpp"
#include "kernels/cuda/fp8_cast.hpp"
#include "kernels/cuda/fp8_gemm.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

// A host tensor (rows, cols) of bf16-exact values, its FP8 codes as the reference casts
// them with the scale its amax gives, and those codes' values dequantized.
struct Quantized {
  int rows, cols;
  std::vector<float> x;
  float scale;
  std::vector<std::uint8_t> codes;
  std::vector<double> values;  // dequantized: fp8_to_float(code) / scale
};

Quantized quantize(int rows, int cols, std::uint64_t seed, double stddev, const cpu::Fp8Format& f) {
  Quantized q{rows, cols, random_bf16(std::size_t(rows) * cols, seed, stddev), 0.0f, {}, {}};
  q.scale = cpu::fp8_scale_for(cpu::fp8_amax(q.x.data(), std::int64_t(q.x.size())), f);
  for (float v : q.x) {
    q.codes.push_back(cpu::quantize_fp8(v, q.scale, f));
    q.values.push_back(double(cpu::fp8_to_float(q.codes.back(), f)) / q.scale);
  }
  return q;
}

// The device's cast and cast-transpose of q.x, checked code for code; the operands.
struct DeviceFp8 {
  DeviceBuffer data, data_t, dequant;
  Fp8Operand plain(Fp8Kind k) const { return {data.as<std::uint8_t>(), k, dequant.as<float>()}; }
  Fp8Operand transposed(Fp8Kind k) const { return {data_t.as<std::uint8_t>(), k, dequant.as<float>()}; }
};

DeviceFp8 to_device_fp8(const Quantized& q, Fp8Kind kind, TestStream& s) {
  const std::size_t n = q.x.size();
  auto x = upload_bf16(q.x, s);
  auto scale = upload(std::vector<float>{q.scale}, s);
  DeviceFp8 d{DeviceBuffer(n, current_device(), s, "fp8"), DeviceBuffer(n, current_device(), s, "fp8 t"),
              upload(std::vector<float>{1.0f / q.scale}, s)};
  cast_transpose_to_fp8(d.data.as<std::uint8_t>(), d.data_t.as<std::uint8_t>(), x.as<bf16>(), q.rows, q.cols,
                        scale.as<float>(), kind, s);
  const auto codes = download<std::uint8_t>(d.data.data(), n, s);
  const auto codes_t = download<std::uint8_t>(d.data_t.data(), n, s);
  int wrong = 0, wrong_t = 0;
  for (int r = 0; r < q.rows; ++r)
    for (int c = 0; c < q.cols; ++c) {
      const std::uint8_t want = q.codes[std::size_t(r) * q.cols + c];
      wrong += codes[std::size_t(r) * q.cols + c] != want;
      wrong_t += codes_t[std::size_t(c) * q.rows + r] != want;
    }
  CHECK(wrong == 0);
  CHECK(wrong_t == 0);
  return d;
}

TEST_CASE("cuda fp8 linear forward and both backward GEMMs match the dequantized reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  constexpr int N = 64, IC = 128, OC = 96;
  const Quantized x = quantize(N, IC, 61, 1.0, cpu::kE4M3);
  const Quantized w = quantize(OC, IC, 62, 0.05, cpu::kE4M3);
  const Quantized dy = quantize(N, OC, 63, 0.1, cpu::kE5M2);
  const auto bias = random_bf16(OC, 64, 0.1);
  const DeviceFp8 xd = to_device_fp8(x, Fp8Kind::e4m3, s), wd = to_device_fp8(w, Fp8Kind::e4m3, s),
                  gd = to_device_fp8(dy, Fp8Kind::e5m2, s);

  // forward: out = x w^T + b
  auto bias_d = upload_bf16(bias, s);
  DeviceBuffer out(std::size_t(N) * OC * 2, current_device(), s, "out");
  fp8_linear_forward(out.as<bf16>(), xd.plain(Fp8Kind::e4m3), wd.plain(Fp8Kind::e4m3), bias_d.as<bf16>(), N, IC,
                     OC, s);
  std::vector<double> want_out(std::size_t(N) * OC);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      double acc = bias[o];
      for (int i = 0; i < IC; ++i) acc += x.values[std::size_t(n) * IC + i] * w.values[std::size_t(o) * IC + i];
      want_out[std::size_t(n) * OC + o] = acc;
    }
  CONVEYOR_CHECK_CLOSE(want_out, download_bf16(out.data(), want_out.size(), s), 1e-2);

  // backward input: dx = dy w, from the weight's transposed copy
  DeviceBuffer dx(std::size_t(N) * IC * 2, current_device(), s, "dx");
  fp8_linear_backward_input(dx.as<bf16>(), gd.plain(Fp8Kind::e5m2), wd.transposed(Fp8Kind::e4m3), N, IC, OC, s);
  std::vector<double> want_dx(std::size_t(N) * IC);
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < IC; ++i) {
      double acc = 0;
      for (int o = 0; o < OC; ++o) acc += dy.values[std::size_t(n) * OC + o] * w.values[std::size_t(o) * IC + i];
      want_dx[std::size_t(n) * IC + i] = acc;
    }
  CONVEYOR_CHECK_CLOSE(want_dx, download_bf16(dx.data(), want_dx.size(), s), 1e-2);

  // backward weight: dw += dy^T x, from both transposed copies, onto a gradient already
  // holding values (the += of gradient accumulation), fp32 and bf16
  const auto dw0 = random_bf16(std::size_t(OC) * IC, 65, 0.01);
  std::vector<double> want_dw(dw0.begin(), dw0.end());
  for (int o = 0; o < OC; ++o)
    for (int i = 0; i < IC; ++i) {
      double acc = 0;
      for (int n = 0; n < N; ++n) acc += dy.values[std::size_t(n) * OC + o] * x.values[std::size_t(n) * IC + i];
      want_dw[std::size_t(o) * IC + i] += acc;
    }
  auto dw32 = upload(dw0, s);
  fp8_linear_backward_weight(dw32.as<float>(), gd.transposed(Fp8Kind::e5m2), xd.transposed(Fp8Kind::e4m3), N, IC,
                             OC, s);
  // FP8 products summed by the tensor cores, promoted to fp32 in chunks: 2.8e-4 measured
  // on an H100 (2026-12-07), where an fp32-exact sum would be ~1e-6.
  CONVEYOR_CHECK_CLOSE(want_dw, download_f32(dw32.data(), want_dw.size(), s), 1e-3);
  auto dw16 = upload_bf16(dw0, s);
  fp8_linear_backward_weight(dw16.as<bf16>(), gd.transposed(Fp8Kind::e5m2), xd.transposed(Fp8Kind::e4m3), N, IC,
                             OC, s);
  CONVEYOR_CHECK_CLOSE(want_dw, download_bf16(dw16.data(), want_dw.size(), s), 1e-2);
}

TEST_CASE("cuda fp8 linear refuses shapes off 16 and two E5M2 operands, naming why") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const std::uint8_t* any = reinterpret_cast<const std::uint8_t*>(16);
  const float* scale = reinterpret_cast<const float*>(16);
  const Fp8Operand e4{any, Fp8Kind::e4m3, scale}, e5{any, Fp8Kind::e5m2, scale};
  CHECK_THROWS_WITH_AS(fp8_linear_forward(nullptr, e4, e4, nullptr, 24, 32, 32, s),
                       doctest::Contains("multiples of 16"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8_linear_backward_input(nullptr, e5, e5, 32, 32, 32, s),
                       doctest::Contains("two E5M2"), std::invalid_argument);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
