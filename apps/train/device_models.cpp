#include "apps/train/device_models.hpp"

#include <fmt/format.h>

#include "kernels/common/error.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

namespace conveyor {

void assign_devices(const RunConfig& config, Placement& placement) {
  if (config.devices.kind == "cpu") {
    for (auto& r : placement.ranks) r.device = Device::cpu();
    return;
  }
#if CONVEYOR_WITH_CUDA
  const auto& ids = config.devices.ids;
  for (auto& r : placement.ranks) {
    const int id = ids.empty() ? 0 : static_cast<int>(ids[r.rank % ids.size()]);
    if (!cuda_device_available(id))
      throw InputError(fmt::format(
          "devices.ids: GPU {} is not available on this machine (stage {} needs it; check "
          "nvidia-smi or set devices.kind: cpu)",
          id, r.rank));
    r.device = Device::cuda(id);
  }
#else
  (void)placement;
  throw InputError(
      "devices.kind: 'cuda' needs a build with CUDA (nvcc was not found when conveyor was "
      "built); use devices.kind: cpu");
#endif
}

StageModelFactory stage_model_factory(const RunConfig& config) {
  if (config.devices.kind == "cpu") return make_cpu_stage_model;
#if CONVEYOR_WITH_CUDA
  CudaStageOptions options;
  options.master_fp32 = config.optim.master == "fp32";
  options.deterministic = config.runtime.deterministic;
  options.grads_bf16 = config.optim.grad_dtype == "bf16";
  return [=](const GptConfig& model, const StageSlice& slice, std::uint64_t seed, Device device) {
    CudaStageOptions on_device = options;
    on_device.device = device.index;
    return make_cuda_stage_model(model, slice, seed, on_device);
  };
#else
  throw InputError("devices.kind: 'cuda' needs a build with CUDA");
#endif
}

DType activation_dtype(const RunConfig& config) {
  return config.devices.kind == "cuda" ? DType::bf16 : DType::f32;
}

}  // namespace conveyor
