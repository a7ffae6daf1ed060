#pragma once
// train.sample_every: text the model writes while it trains. Node 0 (the coordinator's)
// draws a sample from each checkpoint written at a multiple of train.sample_every steps:
// the weights gathered there on the CPU at a step boundary, whatever devices or processes
// the stages run on (config validation makes train.sample_every a multiple of
// checkpoint.every). The sample continues train.sample_prompt greedily for
// train.sample_tokens bytes (fewer when model.seq_len fills: apps/sample/generate.hpp),
// logs it and writes a metrics.jsonl row:
//   {"event": "sample", "step": N, "prompt": P, "text": T, "tokens": n, "seconds": s}
// (N: steps done, as the `checkpoint` row's; T: the new text only, invalid UTF-8 replaced).
// A run on text (data.format text) writes bytes; one on token ids (data.format tokens)
// encodes the prompt and decodes with the tokenizer.json of the Hugging Face folder it
// started from (--init-from), whose ids the token file holds: without one it is refused at
// start (sample_tokenizer).
// It runs on the thread that reports checkpoints (the coordinator's, at a step boundary):
// the step loop waits for the checkpoint's read and the generation (milliseconds for the
// shipped configs; about a second per 100 tokens per billion parameters). A sample that fails
// (the checkpoint pruned meanwhile, say) is a log line, never the run's end. Every checkpoint
// TrainCheckpoints::on_written reports (each one written, in step order) is sampled when due.
#include <cstdint>
#include <optional>
#include <string>

#include "actors/checkpoint/checkpoint_writer.hpp"

namespace conveyor {

class MetricsLog;
class Progress;

struct TrainSampleSettings {
  std::int64_t every = 0;  // 0: off
  std::string prompt = "\n";
  std::int64_t tokens = 64;
  std::string tokenizer;  // a tokenizer.json (data.format tokens); empty: the text is bytes
};

struct RunConfig;

/// The tokenizer.json that train.sample_every's samples of `config` are written with: empty
/// for data.format text (bytes) or no samples; for tokens, `init_from`/tokenizer.json,
/// checked to read as byte-level BPE with no more tokens than model.vocab. InputError
/// naming train.sample_every otherwise (exit 2, before the run starts).
std::string sample_tokenizer(const RunConfig& config, const std::optional<std::string>& init_from);

class TrainSamples {
 public:
  TrainSamples(TrainSampleSettings settings, MetricsLog& log, Progress& progress)
      : s_(std::move(settings)), log_(log), progress_(progress) {}
  /// A checkpoint was written: a sample when its step is due.
  void on_checkpoint(const checkpoint::WriteResult& written);

 private:
  TrainSampleSettings s_;
  MetricsLog& log_;
  Progress& progress_;
};

}  // namespace conveyor
