#pragma once
// conveyor's logits and loss of given tokens, from a checkpoint: what a comparison with
// another implementation of the same model needs (scripts/hf_reference_check.py against
// transformers; `conveyor hf logits`). The whole model is ONE CPU stage (GptStage over the
// whole-model slice: embedding, every block, head), its weights the checkpoint's, so the
// numbers are those of conveyor's CPU reference kernels, whatever partition trained it.
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

namespace conveyor {

/// A checkpoint's model, whole, on the CPU.
struct CheckpointModel {
  std::string step_dir;  // the step folder loaded
  std::int64_t step = 0;
  GptConfig model;       // the manifest's config's model.*
  GptStage stage;        // the whole-model slice, the checkpoint's weights
};

/// ARG as `train --resume` takes it (a run folder, a checkpoint.dir such as `hf import`'s
/// --out, or one step folder; the newest checkpoint that verifies). The manifest must hold
/// its config (conveyor writes it). Only the parameters are read; AdamW's moments, when
/// there, are left on disk. Throws InputError naming ARG: nothing usable, no config, or
/// tensors that are not exactly the model's (missing, extra, misshapen).
CheckpointModel load_checkpoint_model(const std::string& arg);

struct TokenLogits {
  Tensor logits;      // (B, T, V) f32
  double loss = 0.0;  // mean cross-entropy over B*T positions
};

/// The token rows of a safetensors file: its tensor "tokens", i32 (B, T + 1) (numpy's or
/// torch's int32). Throws InputError naming the file when it is not there or not that.
Tensor read_token_rows(const std::string& path);

/// The model on `tokens`, i32 (B, T + 1) as above. Throws InputError on another dtype or
/// rank, T + 1 < 2, T beyond the model's seq_len, or an id outside the vocabulary.
TokenLogits checkpoint_logits(CheckpointModel& model, const Tensor& tokens);

}  // namespace conveyor
