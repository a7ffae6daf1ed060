#pragma once
// A model's weights from wherever they are, for `train --init-from` and `hf export`. PATH is
//   a Hugging Face model folder   config.json beside model.safetensors or its index: read as
//                                 `hf import` reads it (kernels/model/hf_weights.hpp)
//   a conveyor run folder         (a metrics.jsonl) its weights.safetensors when its last row
//                                 is the summary (the run ended, and those weights are its
//                                 newest), else the newest verified checkpoint of its
//                                 checkpoint folder (config.yaml's checkpoint.dir, or
//                                 checkpoints/)
//   a conveyor checkpoint         a step-N folder, or a folder of them (a checkpoint.dir, an
//                                 `hf import` folder): as `--resume` resolves it, its newest
//                                 checkpoint that verifies (actors/checkpoint/resume.hpp)
// Whatever the source, the result is the whole model's weights in conveyor's names, order
// and layout, f32, with the model they are (config.json's, the manifest's or the run's
// config). For a GPT-2 from a Hugging Face folder, model.seq_len is n_positions: every wpe
// row is kept.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct ModelWeights {
  enum class Source { hf_folder, run_weights, checkpoint };
  Source source = Source::checkpoint;
  std::string path;   // what was read: the Hugging Face folder, the weights file or the step folder
  std::int64_t step = 0;  // training steps behind the weights (0 for a Hugging Face folder)
  std::string description;  // one line for the log: what was read, and what was skipped
  GptConfig model;
  std::vector<NamedTensor> weights;  // stage_param_layout's order for one stage holding all
};

/// "hf_folder", "run_weights" or "checkpoint", for logs and JSON.
const char* source_name(ModelWeights::Source source);

/// Throws InputError naming `flag` (the option or command), PATH and the reason: no such
/// folder, none of the above, nothing that verifies, weights not those of their config.
ModelWeights read_model_weights(const std::string& path, const std::string& flag);

}  // namespace conveyor
