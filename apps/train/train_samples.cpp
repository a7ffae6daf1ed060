#include "apps/train/train_samples.hpp"

#include <fmt/format.h>

#include <exception>
#include <filesystem>

#include "apps/sample/generate.hpp"
#include "apps/sample/sample_model.hpp"
#include "kernels/model/kv_decoder.hpp"
#include "apps/text/message_text.hpp"
#include "apps/train/metrics_log.hpp"
#include "apps/train/progress.hpp"
#include "apps/config/run_config.hpp"
#include "apps/tokenizer/bpe_tokenizer.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {

std::string sample_tokenizer(const RunConfig& config, const std::optional<std::string>& init_from) {
  if (config.train.sample_every <= 0 || config.data.format == DataFormat::text) return "";
  const std::string head = fmt::format("train.sample_every: {} with data.format tokens", config.train.sample_every);
  if (!init_from)
    throw InputError(head + " needs the tokenizer of the token ids to write the samples: start the run "
                            "with --init-from a Hugging Face folder holding tokenizer.json, or set "
                            "train.sample_every: 0 and sample a checkpoint with `conveyor sample CKPT "
                            "--tokenizer tokenizer.json`");
  const auto file = std::filesystem::path(*init_from) / "tokenizer.json";
  if (!std::filesystem::is_regular_file(file))
    throw InputError(fmt::format("{}: --init-from {} holds no tokenizer.json to write the samples with "
                                 "(set train.sample_every: 0, or start from the Hugging Face folder that has it)",
                                 head, *init_from));
  try {
    const auto tokenizer = tokenizer::BpeTokenizer::from_file(file.string());
    if (tokenizer.size() > config.model.vocab)
      throw InputError(fmt::format("{}: {} has {} tokens, more than model.vocab {}", head, file.string(),
                                   tokenizer.size(), config.model.vocab));
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}: {} (a tokenizer.json of byte-level BPE)", head, file.string(),
                                 one_line_message(e.what())));
  }
  return file.string();
}

void TrainSamples::on_checkpoint(const checkpoint::WriteResult& written) {
  if (s_.every <= 0 || written.step <= 0 || written.step % s_.every != 0) return;
  try {
    SampleModel m = load_sample_model(written.path, s_.tokenizer, "--init-from");
    if (s_.tokenizer.empty()) m.codec = TextCodec::bytes();  // text data: a byte is its id, whatever model.vocab
    const std::vector<std::int32_t> prompt = *m.codec.encode(s_.prompt);  // bytes and BPE always encode
    KvDecoder decoder(m.model.model, m.model.stage.params(), static_cast<std::int64_t>(prompt.size()) + s_.tokens);
    const Generated g = generate(decoder, prompt, s_.tokens, SamplingSettings{0.0, 0, 0});
    const std::string text = m.codec.decode(g.ids);
    log_.event({{"event", "sample"},
                {"step", written.step},
                {"prompt", s_.prompt},
                {"text", text},
                {"tokens", g.ids.size()},
                {"seconds", g.seconds}});
    progress_.note(fmt::format("sample after step {}: {}", written.step, printable_excerpt(s_.prompt + text, 200)));
  } catch (const std::exception& e) {
    progress_.note(fmt::format("sample after step {} skipped: {}", written.step, one_line_message(e.what())));
  }
}

}  // namespace conveyor
