#pragma once
// Which stage model each rank gets, from devices.kind and devices.ids: the CPU reference,
// or a CUDA model on the rank's GPU. Ranks take devices.ids round-robin (all on GPU 0
// when ids is empty); the placement records each rank's device.
#include "actors/plan/placement.hpp"
#include "apps/config/run_config.hpp"
#include "kernels/model/stage_model.hpp"
#include "kernels/tensor/dtype.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

namespace conveyor {

/// Sets each rank's device in `placement`. Throws InputError for devices.kind cuda in a
/// build without CUDA, or for a GPU id that this machine does not have.
void assign_devices(const RunConfig& config, Placement& placement);

/// The device of each of `actors` stage actors in replica-major order (data parallelism:
/// replica r's stage s is actor r·P + s), devices.ids round-robin. Throws as
/// assign_devices.
std::vector<Device> actor_devices(const RunConfig& config, int actors);

#if CONVEYOR_WITH_CUDA
/// What the config asks of every CUDA stage model (optim.master, optim.grad_dtype,
/// runtime.deterministic, runtime.attention); the device is each rank's own.
CudaStageOptions cuda_stage_options(const RunConfig& config);
#endif

/// The factory for the ranks' stage models.
StageModelFactory stage_model_factory(const RunConfig& config);

/// The dtype of activations and gradients between stages.
DType activation_dtype(const RunConfig& config);

}  // namespace conveyor
