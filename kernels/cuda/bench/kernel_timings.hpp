#pragma once
// Times every CUDA kernel of a block (GPT-2's or Llama's: model.arch), the head and the
// optimizer at one model's shapes (one micro-batch of B sequences of T tokens), on inputs filled with fresh random
// values, with CUDA events around repeated launches on one stream. What `conveyor bench
// kernels` prints; the per-kernel table of docs/PERFORMANCE.md comes from it.
//
// Each row is bound either by matrix math (flops > 0: TFLOP/s against the bf16 ceiling)
// or by memory traffic (bytes > 0: TB/s against the copy ceiling): the minimum traffic
// of the kernel's contract (every input read once, every output written once), so a
// kernel that re-reads its inputs shows as below the ceiling.
//
// Every kernel that writes or reads weight gradients has a row per gradient type
// (optim.grad_dtype f32 and bf16), so one call compares the two accumulations.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct KernelTiming {
  std::string name;    // "gemm fc1 forward (+bias +GELU)"
  std::string group;   // "block", "head", "optimizer"
  int per_step = 0;    // launches per train step of one micro-batch through every layer
  double ms = 0.0;     // median time of one launch
  double flops = 0.0;  // per launch, when bound by math
  double bytes = 0.0;  // per launch, when bound by memory
  std::string master;  // "fp32" or "bf16": counts only under that optim.master; "" always
  std::string grad_dtype;  // "f32" or "bf16": counts only under that optim.grad_dtype; "" always
};

struct KernelBenchOptions {
  GptConfig model;
  std::int64_t micro_batch_size = 4;
  int device = 0;
  int repeats = 20;  // timed launches per kernel (after 3 warm-up launches)
};

/// REQUIRES: a CUDA device `options.device`. Throws CudaError on any CUDA failure and
/// std::invalid_argument for shapes the kernels do not take (as the stage model would).
std::vector<KernelTiming> time_model_kernels(const KernelBenchOptions& options);

}  // namespace conveyor
