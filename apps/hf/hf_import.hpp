#pragma once
// `conveyor hf import HF_DIR --out OUT`: a Hugging Face model folder (LlamaForCausalLM or
// GPT2LMHeadModel; kernels/model/hf_weights.hpp) as a conveyor checkpoint folder:
//   OUT/config.yaml                    the model keys config.json gives, and
//                                      pipeline.stages 1: `conveyor train OUT/config.yaml`
//                                      loads it
//   OUT/step-000000/manifest.json      step 0, no optimizer steps, one stage, the resolved
//                                      config (config.yaml's, every other key at its default)
//                                      under a comment naming the folder it came from
//   OUT/step-000000/stage-0.safetensors  every parameter in conveyor's names, f32
// so OUT is a checkpoint.dir that `train --resume OUT` starts from (resharded to any
// partition). `train --init-from HF_DIR` reads the folder through the same code
// (kernels/model/hf_weights.hpp) without writing this checkpoint (apps/train/init_from.hpp);
// `hf export` is the way back (apps/hf/hf_export.hpp). There are no AdamW moments: resume loads weights alone and AdamW starts as
// in a fresh run (t = 0, moments zero), which is what a first step needs.
// Nothing half-written: everything goes into a hidden folder beside OUT, renamed to OUT at
// the end; OUT must not exist. Bad input is an InputError naming the file, key or tensor.
#include <cstdint>
#include <map>
#include <string>

#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct HfImportOptions {
  std::string hf_dir;
  std::string out;
  std::int64_t seq_len = 0;  // > 0: cap model.seq_len (kernels/model/hf_config.hpp)
};

struct HfImportResult {
  std::string architecture;  // config.json's
  GptConfig model;
  std::int64_t max_positions = 0;
  std::string out;
  std::string checkpoint;  // OUT/step-000000
  std::string config_file;
  int tensors = 0;  // conveyor parameters written
  std::uint64_t parameters = 0;
  std::uint64_t bytes = 0;
  std::map<std::string, int> dtypes;  // stored dtype -> Hugging Face tensors read
  int ignored = 0;  // buffers of the folder left out
};

HfImportResult import_hf_folder(const HfImportOptions& options);

}  // namespace conveyor
