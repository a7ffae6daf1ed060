#pragma once
// `conveyor bench kernels [CONFIG]`: every CUDA kernel of the config's model at its shapes
// (one micro-batch), timed on the GPU: ms per launch, achieved TFLOP/s or TB/s and the share
// of the H200's measured ceilings, and the kernel time of one train step summed from them
// (every layer, every micro-batch, one optimizer step) to set beside `bench e2e`'s step time.
// The attention rows time the implementation runtime.attention names (--set
// runtime.attention=cudnn for cuDNN's; kernels, the default, for conveyor's own).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

// Ceilings measured on one H200 of the GPU machine (docs/PERFORMANCE.md):
// bf16 matrix products and device-memory copies.
inline constexpr double kBf16MatrixTflops = 790.0;
inline constexpr double kCopyTBps = 4.3;

/// Bounds of --device and --repeats: far above any host's GPU count (a missing device is
/// named at run time) and above any useful number of timed launches.
inline constexpr int kMaxDeviceIndex = 1023;
inline constexpr int kMaxKernelRepeats = 10000;

struct KernelBenchArgs {
  std::string config = "configs/gpt-1b-2gpu.yaml";
  std::vector<std::string> overrides;  // KEY=VALUE, as --set
  int device = 0;
  int repeats = 20;
};

/// Throws InputError for a bad config or a build/machine without CUDA.
nlohmann::json run_kernel_bench(const KernelBenchArgs& args);

/// A fixed-width table of run_kernel_bench's result, for the terminal.
std::string format_kernel_table(const nlohmann::json& result);

}  // namespace conveyor
