#pragma once
// Types shared by the launcher headers. These headers are plain C++ (no device code):
// tests and the stage code include them from .cpp files compiled by the host compiler.
//
// Conventions of every launcher in kernels/cuda:
// - It runs on the current device; every pointer must be device memory of that device.
// - It queues work on `stream` and returns without waiting.
// - It checks shapes (std::invalid_argument naming the values) and the launch (CudaError).
// - Activations are bf16 and are written with =; parameter gradients are accumulated with
//   += (a few input gradients too, said in the comment). Launchers that write or read
//   parameter gradients take them as fp32 or, overloaded, as bf16 (optim.grad_dtype): the
//   bf16 form sums in fp32 and rounds to nearest even once per launch and element.
// - No reduction uses atomics: the same inputs give bitwise identical outputs.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace conveyor {

using bf16 = __nv_bfloat16;

}  // namespace conveyor
