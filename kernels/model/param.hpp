#pragma once
#include <string>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// One trainable tensor with its gradient. `name` is stage-independent
/// (`wte.weight`, `blocks.3.mlp.fc1.weight`, `ln_f.bias`, `lm_head.weight`; a Llama's in
/// llama_layers.hpp) so that
/// checkpoints and weights files do not depend on how the model was split.
/// `decay` is false for norms, biases and embeddings (AdamW applies no weight decay).
struct Param {
  std::string name;
  Tensor value;  // f32
  Tensor grad;   // f32, same shape; weight gradients are accumulated with +=
  bool decay = true;
};

}  // namespace conveyor
