#pragma once
// A Hugging Face model folder as transformers' save_pretrained writes it:
//   config.json                     the model's hyperparameters (read as JSON, not interpreted
//                                   here: kernels/model/hf_config.hpp does that)
//   model.safetensors               the weights in one file, or
//   model-0000k-of-0000n.safetensors with model.safetensors.index.json, whose "weight_map"
//                                   names each tensor's file
// Tensors of F32, BF16 and F16 are read as f32, exactly (every bf16 and f16 value is a
// float). Opening checks everything but the bytes: every file's header, that the index
// and the files agree (each tensor in the file the index names, no tensor twice, none
// unlisted), and every dtype; a problem is an InputError naming the folder, the file and
// the tensor. Thread-safety: const methods may run concurrently.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";

/// Where one tensor's bytes are and what they are.
struct HfTensorInfo {
  std::string file;   // path of its safetensors file
  std::string dtype;  // "F32", "BF16" or "F16"
  Shape shape;
  std::uint64_t offset = 0;  // from the start of the file
  std::uint64_t bytes = 0;
};

class HfFolder {
 public:
  /// Reads config.json and the safetensors headers of `dir`. model.safetensors is used
  /// when present, else the index. Throws InputError (see above).
  explicit HfFolder(std::string dir);

  const std::string& dir() const { return dir_; }
  /// config.json, parsed (a JSON object).
  const nlohmann::json& config() const { return config_; }
  /// Every tensor of the folder, by name.
  const std::map<std::string, HfTensorInfo>& tensors() const { return tensors_; }
  /// The safetensors files read, in name order.
  const std::vector<std::string>& files() const { return files_; }

  /// The tensor `name` as a host f32 tensor of its stored shape. Throws InputError when
  /// the folder holds no such tensor or its file cannot be read.
  Tensor read_f32(const std::string& name) const;

 private:
  void add_file(const std::string& file, const std::map<std::string, std::string>* weight_map);

  std::string dir_;
  nlohmann::json config_;
  std::map<std::string, HfTensorInfo> tensors_;
  std::vector<std::string> files_;
};

}  // namespace conveyor
