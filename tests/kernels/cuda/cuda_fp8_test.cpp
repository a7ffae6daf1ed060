// The device's FP8 casts (kernels/cuda/fp8_cast.hpp: the hardware's saturating conversion)
// against the CPU reference (kernels/cpu/fp8.hpp), bit for bit: every bf16 pattern (all
// 65536, NaNs and infinities included), every tie and near-tie between neighbouring FP8
// values in fp32, random values under a scale; and the amax, exact, NaN-propagating.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/fp8.hpp"
#include "kernels/cpu/fp8_scaling.hpp"
#include "kernels/cuda/fp8_cast.hpp"
#include "kernels/tensor/bf16.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

struct Kind {
  Fp8Kind device;
  const cpu::Fp8Format* format;
};
const Kind kKinds[] = {{Fp8Kind::e4m3, &cpu::kE4M3}, {Fp8Kind::e5m2, &cpu::kE5M2}};

// The device's codes of `x` (fp32) under `scale`.
std::vector<std::uint8_t> device_codes(const std::vector<float>& x, float scale, Fp8Kind kind,
                                       TestStream& s) {
  auto in = upload(x, s);
  auto sc = upload(std::vector<float>{scale}, s);
  DeviceBuffer out(x.size(), current_device(), s, "fp8 out");
  cast_to_fp8(out.as<std::uint8_t>(), in.as<float>(), static_cast<std::int64_t>(x.size()),
              sc.as<float>(), kind, s);
  return download<std::uint8_t>(out.data(), x.size(), s);
}

// Codes equal, or both NaN (the NaN patterns' sign is not specified).
void check_same_codes(const std::vector<float>& x, const std::vector<std::uint8_t>& got,
                      float scale, const cpu::Fp8Format& f) {
  int mismatches = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint8_t want = cpu::float_to_fp8(x[i] * scale, f);
    const bool both_nan = std::isnan(cpu::fp8_to_float(want, f)) &&
                          std::isnan(cpu::fp8_to_float(got[i], f));
    if (want != got[i] && !both_nan && ++mismatches <= 5)
      FAIL_CHECK("x " << x[i] << " scale " << scale << ": reference code " << int(want)
                      << ", device " << int(got[i]));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("cuda fp8 cast of every bf16 value is the CPU reference's code, both formats") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  std::vector<std::uint16_t> bits(65536);
  std::vector<float> values(65536);
  for (int i = 0; i < 65536; ++i) {
    bits[std::size_t(i)] = static_cast<std::uint16_t>(i);
    values[std::size_t(i)] = bf16_bits_to_float(static_cast<std::uint16_t>(i));
  }
  auto in = upload(bits, s);
  auto one = upload(std::vector<float>{1.0f}, s);
  for (const Kind& k : kKinds) {
    const std::string format = k.format->name;
    CAPTURE(format);
    DeviceBuffer out(bits.size(), current_device(), s, "fp8 out");
    cast_to_fp8(out.as<std::uint8_t>(), in.as<bf16>(), 65536, one.as<float>(), k.device, s);
    check_same_codes(values, download<std::uint8_t>(out.data(), bits.size(), s), 1.0f, *k.format);
  }
}

TEST_CASE("cuda fp8 cast rounds ties and near-ties between every pair of neighbours as the reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  for (const Kind& k : kKinds) {
    const std::string format = k.format->name;
    CAPTURE(format);
    std::vector<float> x;
    float previous = 0.0f;
    for (int c = 1; c < 0x80; ++c) {
      const float v = cpu::fp8_to_float(static_cast<std::uint8_t>(c), *k.format);
      if (!std::isfinite(v)) break;
      const float mid = 0.5f * (previous + v);
      for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
        x.push_back(m);
        x.push_back(-m);
      }
      previous = v;
    }
    for (float beyond : {float(k.format->max_finite) * 1.03f, 1e30f,
                         std::numeric_limits<float>::infinity()})
      x.push_back(beyond);
    check_same_codes(x, device_codes(x, 1.0f, k.device, s), 1.0f, *k.format);
  }
}

TEST_CASE("cuda fp8 cast under a scale and the amax match the reference on fresh random values") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const std::vector<float> x = random_bf16(100003, 31, 2.5);  // bf16-exact values
  auto in = upload_bf16(x, s);
  DeviceBuffer amax(sizeof(float), current_device(), s, "amax");
  // 100003 elements take the scalar kernel, 100000 (a multiple of 8) the 16-byte one
  for (const std::int64_t n : {std::int64_t{100000}, std::int64_t{100003}}) {
    CAPTURE(n);
    fp8_amax(amax.as<float>(), in.as<bf16>(), n, s);
    CHECK(download_f32(amax.data(), 1, s)[0] == cpu::fp8_amax(x.data(), n));
  }
  const float got_amax = download_f32(amax.data(), 1, s)[0];
  for (const Kind& k : kKinds) {
    const std::string format = k.format->name;
    CAPTURE(format);
    const float scale = cpu::fp8_scale_for(got_amax, *k.format);
    auto sc = upload(std::vector<float>{scale}, s);
    DeviceBuffer out(x.size(), current_device(), s, "fp8 out");
    cast_to_fp8(out.as<std::uint8_t>(), in.as<bf16>(), static_cast<std::int64_t>(x.size()),
                sc.as<float>(), k.device, s);
    check_same_codes(x, download<std::uint8_t>(out.data(), x.size(), s), scale, *k.format);
  }
  // A NaN anywhere makes the amax NaN: the overflow the NaN policy sees.
  std::vector<float> with_nan = x;
  with_nan[50000] = std::numeric_limits<float>::quiet_NaN();
  auto in_nan = upload_bf16(with_nan, s);
  for (const std::int64_t n : {std::int64_t{100000}, std::int64_t{100003}}) {
    CAPTURE(n);
    fp8_amax(amax.as<float>(), in_nan.as<bf16>(), n, s);
    CHECK(std::isnan(download_f32(amax.data(), 1, s)[0]));
  }
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
