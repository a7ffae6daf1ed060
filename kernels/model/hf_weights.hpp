#pragma once
// A Hugging Face model folder (kernels/io/hf_folder.hpp) as conveyor's model: its config
// (hf_config.hpp) and every parameter, in conveyor's names, order and layout (hf_names.hpp),
// f32. Before any byte is read, the folder's tensors are checked against the recipes, every
// problem gathered into one InputError: a tensor missing, one of another shape, one the
// model has no place for (other than hf_ignorable_tensor's).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/io/hf_folder.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/model/hf_config.hpp"

namespace conveyor {

struct HfWeights {
  HfModelConfig config;
  std::string prefix;                  // of the base model's tensors in the folder
  std::vector<NamedTensor> params;     // stage_param_layout's order for one stage
  std::map<std::string, int> dtypes;   // stored dtype -> tensors of the folder read as it
  std::vector<std::string> ignored;    // tensors of the folder left out (hf_ignorable_tensor)
};

/// `seq_len_cap` as parse_hf_config's (0: the model's maximum positions).
HfWeights read_hf_weights(const HfFolder& folder, std::int64_t seq_len_cap = 0);

}  // namespace conveyor
