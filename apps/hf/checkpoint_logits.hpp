#pragma once
// conveyor's logits and loss of given tokens, from a checkpoint, a run or a Hugging Face
// folder: what a comparison with another implementation of the same model needs
// (scripts/hf_reference_check.py against transformers; `conveyor hf logits`). The whole
// model is ONE stage (the whole-model slice: embedding, every block, head) holding those
// weights: by default a CPU GptStage, so the numbers are those of conveyor's CPU reference
// kernels (fp32), whatever partition or device trained it; on a GPU the CUDA stage model
// (bf16 compute; the fp32 weights as its master), as training there computes them.
//
// Tokens are rows of T + 1 ids: the model reads the first T of each row and is scored on
// the next token at each position, as transformers' `labels=input_ids` scores a row:
//   inputs  = tokens[:, :T]     targets = tokens[:, 1:]
//   logits  (B, T, V) f32, the LM head's output before the softmax
//   loss    mean over the B*T positions of -log softmax(logits)[target]
#include <cstdint>
#include <string>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/tensor/device.hpp"

namespace conveyor {

/// A model's weights, whole, on the CPU.
struct CheckpointModel {
  std::string path;      // what was read: a step folder, a run's weights file or a Hugging Face folder
  std::string source;    // "checkpoint", "run_weights" or "hf_folder" (model_weights.hpp)
  std::int64_t step = 0; // training steps behind the weights
  GptConfig model;       // the weights' model (the manifest's, the run's or config.json's)
  GptStage stage;        // the whole-model slice holding those weights
};

/// PATH as `train --init-from` and `hf export` take it (apps/hf/model_weights.hpp): a
/// checkpoint (a step folder, or a folder of them such as `hf import`'s --out: its newest
/// that verifies), a run folder (its final weights, else its newest checkpoint), or a
/// Hugging Face folder read as `hf import` reads it. Throws InputError naming `command`
/// and PATH.
CheckpointModel load_checkpoint_model(const std::string& path, const std::string& command = "hf logits");

struct TokenLogits {
  Tensor logits;      // (B, T, V) f32
  double loss = 0.0;  // mean cross-entropy over B*T positions
};

/// The token rows of a safetensors file: its tensor "tokens", i32 (B, T + 1) (numpy's or
/// torch's int32). Throws InputError naming the file when it is not there or not that.
Tensor read_token_rows(const std::string& path);

/// The model on `tokens`, i32 (B, T + 1) as above, computed on `device`. Throws InputError
/// on another dtype or rank, T + 1 < 2, T beyond the model's seq_len, an id outside the
/// vocabulary, a GPU that is missing (or a build without CUDA), or a model the CUDA stage
/// model refuses (head size not 64 or 128, d_model or vocab not a multiple of 8).
TokenLogits checkpoint_logits(CheckpointModel& model, const Tensor& tokens,
                              const Device& device = Device::cpu());

}  // namespace conveyor
