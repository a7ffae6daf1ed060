#include "apps/sample/sample_decoder.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "kernels/common/error.hpp"
#include "kernels/model/kv_decoder.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/model/cuda_kv_decoder.hpp"
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

namespace conveyor {

void require_sample_device(const Device& device) {
  if (device.is_cpu()) return;
#if CONVEYOR_WITH_CUDA
  if (!cuda_device_available(device.index))
    throw InputError(fmt::format("--device {}: no such GPU on this machine (check nvidia-smi)", device.str()));
#else
  throw InputError(
      fmt::format("--device {}: this conveyor was built without CUDA (nvcc was not found)", device.str()));
#endif
}

std::unique_ptr<TokenDecoder> make_sample_decoder(const CheckpointModel& model, const Device& device,
                                                  std::int64_t positions) {
  if (device.is_cpu()) return std::make_unique<KvDecoder>(model.model, model.stage.params(), positions);
  require_sample_device(device);
#if CONVEYOR_WITH_CUDA
  try {
    return std::make_unique<CudaKvDecoder>(model.model, model.stage.params(), device.index, positions);
  } catch (const std::invalid_argument& e) {  // a shape the GPU kernels do not take
    throw InputError(fmt::format("--device {}: {}", device.str(), e.what()));
  }
#else
  return nullptr;  // not reached: require_sample_device threw
#endif
}

}  // namespace conveyor
