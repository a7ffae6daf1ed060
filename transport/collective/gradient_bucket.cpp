#include "transport/collective/gradient_bucket.hpp"

#include <stdexcept>

namespace conveyor {

std::size_t GradientBucket::elements() const {
  std::size_t n = 0;
  for (const auto& b : buffers) n += b.count;
  return n;
}

std::string describe_layout(const BucketLayout& layout) {
  std::string text;
  for (const auto& shape : layout) {
    if (!text.empty()) text += ' ';
    text += std::string(dtype_name(shape.dtype)) + "x" + std::to_string(shape.elements);
  }
  return text.empty() ? "no bucket" : text;
}

void check_bucket(const GradientBucket& bucket, const BucketLayout& layout,
                  const std::string& who) {
  const std::string where = who + ": bucket " + std::to_string(bucket.index);
  if (bucket.index >= layout.size())
    throw std::invalid_argument(where + " is not in the layout (" +
                                std::to_string(layout.size()) + " buckets)");
  const BucketShape& shape = layout[bucket.index];
  for (std::size_t i = 0; i < bucket.buffers.size(); ++i) {
    const GradientBuffer& b = bucket.buffers[i];
    if (b.dtype != shape.dtype)
      throw std::invalid_argument(where + ": buffer " + std::to_string(i) + " is " +
                                  std::string(dtype_name(b.dtype)) + ", the bucket is " +
                                  std::string(dtype_name(shape.dtype)));
    if (b.data == nullptr && b.count > 0)
      throw std::invalid_argument(where + ": buffer " + std::to_string(i) + " is null");
  }
  if (bucket.elements() != shape.elements)
    throw std::invalid_argument(where + " holds " + std::to_string(bucket.elements()) +
                                " elements, the layout says " + std::to_string(shape.elements));
}

}  // namespace conveyor
