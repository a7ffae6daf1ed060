#include <stdexcept>

#include "transport/tensor_channel.hpp"

#if CONVEYOR_WITH_CUDA
#include "transport/cuda/cuda_peer_channel.hpp"
#endif

namespace conveyor {
namespace {

// CPU consumer: tensors come from CPU stages of this process; the handle is the tensor.
class HandOffChannel final : public TensorChannel {
 public:
  Tensor receive(const Tensor& sent) override {
    if (!sent.device().is_cpu())
      throw std::invalid_argument("hand-off channel: a CPU stage received " + sent.describe());
    return sent;
  }
  std::string name() const override { return "hand-off"; }
};

}  // namespace

std::unique_ptr<TensorChannel> make_in_process_channel(Device consumer) {
  if (consumer.is_cpu()) return std::make_unique<HandOffChannel>();
#if CONVEYOR_WITH_CUDA
  return make_cuda_peer_channel(consumer.index);
#else
  throw std::invalid_argument("a channel into " + consumer.str() +
                              " needs a build with CUDA (nvcc was not found at build time)");
#endif
}

}  // namespace conveyor
