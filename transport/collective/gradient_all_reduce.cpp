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

void GradientAllReduce::all_gather(const std::vector<GradientBuffer>& /*buffers*/,
                                   const std::vector<std::size_t>& /*counts*/) {
  throw std::logic_error(group().describe() +
                         ": this group cannot all-gather (optim.shard_state needs host stages)");
}

}  // namespace conveyor
