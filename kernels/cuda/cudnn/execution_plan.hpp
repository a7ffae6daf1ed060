#pragma once
// An execution plan for a finalized operation graph: the first engine configuration that
// cuDNN's heuristics offer (mode A, then the fallback list) whose engine is deterministic
// and whose plan finalizes.
//
// Deterministic means the engine carries no CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC note (an
// engine whose notes cannot be read counts as non-deterministic): such an engine is never
// taken, even when nothing else is offered. conveyor's runs are bitwise reproducible
// (runtime.deterministic), and a flash-attention backward that adds dQ with atomics is not.
//
// Finalizing the plan may compile kernels at run time (seconds): build a plan once per
// graph and keep it.
#include <cudnn.h>

#include <cstdint>

#include "kernels/cuda/cudnn/backend_descriptor.hpp"

namespace conveyor::cudnn {

struct ExecutionPlan {
  BackendDescriptor plan;
  std::int64_t workspace_bytes = 0;  // device scratch each execute needs
};

/// Throws CudaError saying, per heuristics mode, how many configurations were offered,
/// how many were non-deterministic and why the others did not finalize.
ExecutionPlan deterministic_execution_plan(cudnnHandle_t handle,
                                           const BackendDescriptor& op_graph);

}  // namespace conveyor::cudnn
