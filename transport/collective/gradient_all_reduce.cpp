#include "transport/collective/gradient_all_reduce.hpp"

#include <stdexcept>

namespace conveyor {

// Host groups: the buffers are final when start_after is called (a CPU stage computes
// inside its calls), so there is nothing to wait for; a stream means a device buffer.
std::unique_ptr<AllReduceHandle> GradientAllReduce::start_after(const GradientBucket& bucket,
                                                                void* producer) {
  if (producer)
    throw std::invalid_argument(group().describe() + ": bucket " + std::to_string(bucket.index) +
                                ": a host group cannot wait for a CUDA stream");
  return start(bucket);
}

}  // namespace conveyor
