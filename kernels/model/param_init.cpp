#include "kernels/model/param_init.hpp"

#include <cmath>
#include <numbers>

namespace conveyor {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The splitmix64 output function (Steele, Lea, Flood 2014).
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Tensors with fewer Box-Muller pairs than this are filled by the calling thread alone.
constexpr std::int64_t kParallelPairs = std::int64_t{1} << 16;

// The i-th output of the splitmix64 sequence started at `key`.
std::uint64_t draw(std::uint64_t key, std::uint64_t i) { return mix64(key + (i + 1) * kGolden); }

}  // namespace

std::uint64_t param_stream_key(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return mix64(mix64(seed + kGolden) ^ h);
}

void fill_normal(Tensor& tensor, std::uint64_t key, double stddev) {
  float* x = tensor.f32();
  const std::int64_t n = tensor.numel();
  const std::int64_t pairs = (n + 1) / 2;
  constexpr double kTwoPow53 = 9007199254740992.0;
  // Element i depends on (key, i) alone, so the threads (all cores, for tensors large
  // enough to pay for them) write the very bits one thread would: the 1B model's 1.3G
  // values took 46 s on one core of the build machine, its log/sincos mostly.
#pragma omp parallel for schedule(static) if (pairs >= kParallelPairs)
  for (std::int64_t pair = 0; pair < pairs; ++pair) {
    const auto i = static_cast<std::uint64_t>(pair);
    // u1 in (0, 1] so the log is finite; u2 in [0, 1).
    const double u1 = static_cast<double>((draw(key, 2 * i) >> 11) + 1) / kTwoPow53;
    const double u2 = static_cast<double>(draw(key, 2 * i + 1) >> 11) / kTwoPow53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    x[2 * pair] = static_cast<float>(stddev * r * std::cos(theta));
    if (2 * pair + 1 < n) x[2 * pair + 1] = static_cast<float>(stddev * r * std::sin(theta));
  }
}

void fill_constant(Tensor& tensor, float value) {
  for (float& v : tensor.f32_span()) v = value;
}

}  // namespace conveyor
