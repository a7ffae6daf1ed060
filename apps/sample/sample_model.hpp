#pragma once
// What `conveyor sample` and train.sample_every read: a model's weights, whole, on the CPU
// (apps/hf/checkpoint_logits.hpp's load_checkpoint_model: a checkpoint, a run or a Hugging
// Face folder, as `hf logits` and `train --init-from` take them), and how its text is
// written (text_codec.hpp): `tokenizer` when given, else PATH/tokenizer.json when PATH is
// a folder holding one (a Hugging Face folder), else bytes for a vocab of 256, else ids.
#include <string>

#include "apps/hf/checkpoint_logits.hpp"
#include "apps/sample/text_codec.hpp"

namespace conveyor {

struct SampleModel {
  CheckpointModel model;
  TextCodec codec = TextCodec::ids();
};

/// Throws InputError naming PATH or `tokenizer_flag` (the option that named the file): no
/// weights there, a tokenizer.json that is unreadable or not byte-level BPE, or one with
/// more tokens than the model's vocab.
SampleModel load_sample_model(const std::string& path, const std::string& tokenizer,
                              const std::string& tokenizer_flag = "--tokenizer");

}  // namespace conveyor
