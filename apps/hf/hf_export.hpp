#pragma once
// `conveyor hf export RUN_DIR|CKPT_DIR --out OUT [--dtype fp32|bf16]`: a conveyor model's
// weights (apps/hf/model_weights.hpp: a run's final weights or newest checkpoint, or a
// checkpoint) as a Hugging Face model folder that transformers' from_pretrained loads
// (LlamaForCausalLM or GPT2LMHeadModel):
//   OUT/config.json          every key of the architecture (kernels/model/hf_config.hpp,
//                            hf_config_json), torch_dtype the weights' dtype
//   OUT/model.safetensors    every tensor in transformers' names (kernels/model/
//                            hf_export_tensors.hpp), F32, or BF16 rounded to nearest even;
//                            metadata {"format": "pt"}, which transformers expects
// `hf import` of OUT gives the same weights back, bit for bit for an fp32 export. Nothing
// half-written: OUT appears whole or not at all (apps/hf/new_folder.hpp); it must not
// exist. Bad input is an InputError naming the path or the value.
#include <cstdint>
#include <string>

#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct HfExportOptions {
  std::string from;  // RUN_DIR, CKPT_DIR or a step folder
  std::string out;
  std::string dtype = "fp32";  // fp32 or bf16
};

struct HfExportResult {
  std::string architecture;  // config.json's
  std::string from;          // what was read (a step folder, a weights file)
  std::string source;        // source_name(): "checkpoint", "run_weights"
  std::int64_t step = 0;
  GptConfig model;
  std::string out;
  std::string dtype;
  int tensors = 0;  // Hugging Face tensors written
  std::uint64_t parameters = 0;
  std::uint64_t bytes = 0;  // of model.safetensors
};

HfExportResult export_hf_folder(const HfExportOptions& options);

}  // namespace conveyor
