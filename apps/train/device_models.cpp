#include "apps/train/device_models.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "apps/config/schedule_spec.hpp"
#include "kernels/common/error.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

namespace conveyor {

namespace {

// The device of stage actor `actor` (a pipeline rank, or with replicas an actor in
// replica-major order): devices.ids round-robin.
Device device_of(const RunConfig& config, int actor) {
  if (config.devices.kind == DeviceKind::cpu) return Device::cpu();
#if CONVEYOR_WITH_CUDA
  const auto& ids = config.devices.ids;
  const int id = ids.empty() ? 0 : static_cast<int>(ids[static_cast<std::size_t>(actor) % ids.size()]);
  if (!cuda_device_available(id))
    throw InputError(fmt::format(
        "devices.ids: GPU {} is not available on this machine (stage {} needs it; check "
        "nvidia-smi or set devices.kind: cpu)",
        id, actor));
  return Device::cuda(id);
#else
  (void)actor;
  throw InputError(
      "devices.kind: 'cuda' needs a build with CUDA (nvcc was not found when conveyor was "
      "built); use devices.kind: cpu");
#endif
}

#if CONVEYOR_WITH_CUDA
AttentionBackend attention_backend_of(AttentionChoice choice) {
  switch (choice) {
    case AttentionChoice::cudnn:
      return AttentionBackend::cudnn;
    case AttentionChoice::kernels:
      return AttentionBackend::kernels;
  }
  throw std::logic_error("runtime.attention: a choice outside AttentionChoice");
}
#endif

}  // namespace

void assign_devices(const RunConfig& config, Placement& placement) {
  for (auto& r : placement.ranks) r.device = device_of(config, r.rank);
}

std::vector<Device> actor_devices(const RunConfig& config, int actors) {
  std::vector<Device> out;
  for (int a = 0; a < actors; ++a) out.push_back(device_of(config, a));
  return out;
}

#if CONVEYOR_WITH_CUDA
CudaStageOptions cuda_stage_options(const RunConfig& config) {
  CudaStageOptions options;
  options.master_fp32 = config.optim.master == MasterDtype::fp32;
  options.deterministic = config.runtime.deterministic;
  options.grads_bf16 = config.optim.grad_dtype == GradDtype::bf16;
  options.attention = attention_backend_of(config.runtime.attention);
  if (config.precision.matmul == MatmulPrecision::fp8) {
    const auto& p = config.precision;
    options.fp8 = Fp8Recipe{
        p.fp8_grad == Fp8GradFormat::e4m3 ? Fp8Kind::e4m3 : Fp8Kind::e5m2,
        p.fp8_scaling == Fp8Scaling::delayed ? static_cast<int>(p.amax_history) : 0,
        p.fp8_fused_casts};
  }
  options.defer_loss_readback = true;  // StageWorker resolves the losses in take_report
  return options;
}
#endif

StageModelFactory stage_model_factory(const RunConfig& config) {
  if (config.devices.kind == DeviceKind::cpu) return make_cpu_stage_model;
#if CONVEYOR_WITH_CUDA
  const CudaStageOptions options = cuda_stage_options(config);
  return [=](const GptConfig& model, const StageSlice& slice, std::uint64_t seed, Device device,
             float loss_scale) {
    CudaStageOptions on_device = options;
    on_device.device = device.index;
    // The scale the stage worker calls every backward with: the head forms d(loss)/d(logits)
    // with it in its forward.
    on_device.head_loss_scale = loss_scale;
    return make_cuda_stage_model(model, slice, seed, on_device);
  };
#else
  throw InputError("devices.kind: 'cuda' needs a build with CUDA");
#endif
}

DType activation_dtype(const RunConfig& config) {
  switch (config.devices.kind) {
    case DeviceKind::cpu:
      return DType::f32;
    case DeviceKind::cuda:
      return DType::bf16;
  }
  throw std::logic_error("devices.kind: a kind outside DeviceKind");
}

}  // namespace conveyor
