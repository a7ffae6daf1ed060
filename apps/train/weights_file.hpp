#pragma once
// weights.safetensors: the model's weights, as `conveyor train` writes them at the end of a
// run and `conveyor checkpoint export` writes them from a checkpoint: the global parameter
// names in model order, f32, and the metadata PyTorch-side loaders expect ("format": "pt").
// One writer for both, so an export of a run's last checkpoint is its weights byte for byte.
#include <string>
#include <vector>

#include "kernels/io/safetensors.hpp"

namespace conveyor {

inline constexpr const char* kWeightsFile = "weights.safetensors";

/// Written atomically (write_safetensors). Throws std::runtime_error naming the file.
inline void write_weights_file(const std::string& path, const std::vector<NamedTensor>& weights) {
  write_safetensors(path, weights, {{"format", "pt"}, {"producer", "conveyor"}});
}

}  // namespace conveyor
