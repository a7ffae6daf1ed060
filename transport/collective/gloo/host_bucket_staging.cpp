#include "transport/collective/gloo/host_bucket_staging.hpp"

#include <algorithm>

namespace conveyor {

void pack_bucket(const GradientBucket& bucket, std::span<float> flat) {
  std::size_t at = 0;
  for (const auto& b : bucket.buffers) {
    const auto* values = static_cast<const float*>(b.data);
    std::copy(values, values + b.count, flat.begin() + at);
    at += b.count;
  }
}

void unpack_bucket(std::span<const float> flat, const GradientBucket& bucket, float divisor) {
  std::size_t at = 0;
  for (const auto& b : bucket.buffers) {
    auto* values = static_cast<float*>(b.data);
    if (divisor == 1.0f) {
      std::copy(flat.begin() + at, flat.begin() + at + b.count, values);
    } else {
      for (std::size_t i = 0; i < b.count; ++i) values[i] = flat[at + i] / divisor;
    }
    at += b.count;
  }
}

void divide_in_place(std::span<float> values, float divisor) {
  if (divisor == 1.0f) return;
  for (float& v : values) v /= divisor;
}

}  // namespace conveyor
