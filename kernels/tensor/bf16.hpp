#pragma once
// bfloat16 on the host: the top 16 bits of an IEEE float, rounded to nearest even (the
// rounding __float2bfloat16 uses on the device, so host and device conversions agree bit
// for bit). NaN stays NaN (quiet). Plain C++: no CUDA header needed.
#include <bit>
#include <cstdint>
#include <vector>

namespace conveyor {

inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float bf16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// The float nearest to f that bf16 can hold.
inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

inline std::vector<std::uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16_bits(v[i]);
  return out;
}

inline std::vector<float> from_bf16_bits(const std::vector<std::uint16_t>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_bits_to_float(v[i]);
  return out;
}

}  // namespace conveyor
