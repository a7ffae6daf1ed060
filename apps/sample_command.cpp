// conveyor sample PATH [--prompt TEXT | --prompt-ids IDS] [--tokens N] [--temperature T]
//                      [--top-k K] [--seed S] [--tokenizer FILE] [--device cpu|cuda[:N]]
//                      [--format text|json]
// Text the model writes after a prompt: PATH's weights (a run, a checkpoint or a Hugging Face
// folder, as `hf logits` reads them: apps/sample/sample_model.hpp), the whole model with a
// KV cache on the CPU (kernels/model/kv_decoder.hpp, fp32) or on one GPU
// (kernels/cuda/model/cuda_kv_decoder.hpp, bf16 weights and cache: apps/sample/
// sample_decoder.hpp), one token at a time (apps/sample/generate.hpp). Temperature 0 is
// greedy; otherwise a draw from the softmax of the top-k logits, seeded, on the host for
// either device: the same seed gives the same text. A byte-level model (vocab 256) reads and
// writes bytes; a tokenizer.json (PATH's, or --tokenizer) encodes the prompt and decodes the
// text (byte-level BPE: apps/tokenizer/); without either, give the prompt as --prompt-ids
// and the tokens print as ids.
// stdout: the prompt and its continuation as they are drawn (text), or one JSON object alone
// (--format json). Progress goes to stderr. Bad input (a flag's value, a prompt as long as
// seq_len, no weights at PATH, a tokenizer.json that is not byte-level BPE, --device cuda:N
// where there is no such GPU or conveyor was built without CUDA) is one `error:` line naming
// the flag and exit code 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "apps/commands.hpp"
#include "apps/device_flag.hpp"
#include "apps/sample/generate.hpp"
#include "apps/sample/sample_decoder.hpp"
#include "apps/sample/sample_model.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

struct SampleOptions {
  std::string path;
  std::string prompt = "\n";
  std::string prompt_ids;
  std::int64_t tokens = 128;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
  std::string tokenizer;
  std::string device = "cpu";
  std::string format = "text";
};

// "12, 7 99" → {12, 7, 99}; the error names --prompt-ids and the word.
std::vector<std::int32_t> parse_ids(const std::string& text, std::int64_t vocab) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream in(spaced);
  std::vector<std::int32_t> ids;
  for (std::string word; in >> word;) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v >= vocab)
      throw InputError(fmt::format("--prompt-ids: '{}' is not a token id in [0, {})", word, vocab));
    ids.push_back(static_cast<std::int32_t>(v));
  }
  if (ids.empty()) throw InputError("--prompt-ids: no ids in '" + text + "'");
  return ids;
}

void run_sample(const SampleOptions& o, bool prompt_given) {
  const Device device = parse_device_flag(o.device).value();  // checked by the option
  require_sample_device(device);  // before reading the weights
  SampleModel m = load_sample_model(o.path, o.tokenizer);
  const GptConfig& c = m.model.model;
  std::vector<std::int32_t> prompt;
  if (!o.prompt_ids.empty()) {
    prompt = parse_ids(o.prompt_ids, c.vocab);
  } else if (auto ids = m.codec.encode(o.prompt)) {
    prompt = std::move(*ids);
  } else {
    throw InputError(fmt::format("{}: a model of vocab {} without a tokenizer.json: give the prompt as "
                                 "--prompt-ids (token ids), or a tokenizer with --tokenizer{}",
                                 o.path, c.vocab, prompt_given ? " (--prompt is text)" : ""));
  }
  if (prompt.empty())
    throw InputError("--prompt: empty, and the tokenizer puts no BOS before it: give at least one character");
  for (std::int32_t id : prompt)
    if (id >= c.vocab)
      throw InputError(fmt::format("--prompt: token {} is outside the model's vocab of {}", id, c.vocab));
  if (static_cast<std::int64_t>(prompt.size()) >= c.seq_len)
    throw InputError(fmt::format("--prompt: {} tokens leave no room in the model's seq_len of {}", prompt.size(),
                                 c.seq_len));
  fmt::print(stderr, "conveyor sample: {} ({}, step {}): {} {} layers, d_model {}, vocab {}, seq_len {}; text as {}{}\n",
             m.model.path, m.model.source, m.model.step, model_arch_name(c.arch), c.layers, c.d_model, c.vocab,
             c.seq_len, m.codec.name(), m.codec.tokenizer_path().empty() ? "" : " (" + m.codec.tokenizer_path() + ")");
  fmt::print(stderr, "conveyor sample: prompt of {} tokens, up to {} new, temperature {}, top-k {}, seed {}, on {}\n",
             prompt.size(), o.tokens, o.temperature, o.top_k, o.seed, device.str());

  // The cache holds what this text needs, not a long-context model's whole seq_len.
  const std::unique_ptr<TokenDecoder> decoder =
      make_sample_decoder(m.model, device, static_cast<std::int64_t>(prompt.size()) + o.tokens);
  const bool text = o.format == "text";
  if (text) {
    fmt::print("{}", m.codec.kind() == TextCodec::Kind::ids ? m.codec.decode(prompt) + " |" : o.prompt);
    std::fflush(stdout);
  }
  const auto stream = [&](std::int32_t id) {
    if (!text) return;
    const std::int32_t one[] = {id};
    fmt::print("{}{}", m.codec.kind() == TextCodec::Kind::ids ? " " : "", m.codec.decode(one));
    std::fflush(stdout);
  };
  const SamplingSettings sampling{o.temperature, o.top_k, o.seed};
  const Generated g = generate(*decoder, prompt, o.tokens, sampling, stream);
  const double per_s = g.seconds > 0 ? static_cast<double>(g.ids.size()) / g.seconds : 0.0;
  if (g.hit_seq_len)
    fmt::print(stderr, "conveyor sample: stopped after {} tokens: the model's seq_len of {} is full\n", g.ids.size(),
               c.seq_len);
  fmt::print(stderr, "conveyor sample: {} tokens in {:.2f} s ({:.1f} tokens/s)\n", g.ids.size(), g.seconds, per_s);
  if (text) {
    fmt::print("\n");
    return;
  }
  const nlohmann::json j = {{"path", m.model.path},
                            {"source", m.model.source},
                            {"step", m.model.step},
                            {"arch", std::string(model_arch_name(c.arch))},
                            {"text_as", m.codec.name()},
                            {"tokenizer", m.codec.tokenizer_path().empty() ? nlohmann::json(nullptr)
                                                                           : nlohmann::json(m.codec.tokenizer_path())},
                            {"prompt_ids", prompt},
                            {"ids", g.ids},
                            {"text", m.codec.kind() == TextCodec::Kind::ids ? nlohmann::json(nullptr)
                                                                            : nlohmann::json(m.codec.decode(g.ids))},
                            {"tokens", g.ids.size()},
                            {"stopped", g.hit_seq_len ? "seq_len" : "tokens"},
                            {"temperature", o.temperature},
                            {"top_k", o.top_k},
                            {"seed", o.seed},
                            {"device", device.str()},
                            {"seconds", g.seconds},
                            {"tokens_per_s", per_s}};
  // Text cut inside a UTF-8 character, or bytes that are not UTF-8, become U+FFFD here.
  fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto o = std::make_shared<SampleOptions>();
  auto* cmd = app.add_subcommand(
      "sample", "Text the model writes after a prompt: a run's, a checkpoint's or a Hugging Face folder's weights on "
                "the CPU or a GPU with a KV cache; greedy (--temperature 0) or seeded top-k sampling");
  cmd->add_option("path", o->path,
                  "A run folder (its final weights, else its newest checkpoint), a checkpoint (a step folder or a "
                  "folder of them) or a Hugging Face folder (its tokenizer.json decodes the text)")
      ->required();
  auto* prompt = cmd->add_option("--prompt", o->prompt, "The text to continue (default: a newline)");
  cmd->add_option("--prompt-ids", o->prompt_ids,
                  "The prompt as token ids (\"12,7,99\"), for a model without a tokenizer.json")
      ->excludes(prompt);
  cmd->add_option("--tokens", o->tokens, "New tokens to write (fewer when the model's seq_len fills)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "Softmax temperature; 0 is greedy (the most likely token)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Draw among the K most likely tokens; 0: all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the draws: the same seed, weights and prompt give the same text")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "A tokenizer.json (byte-level BPE, as GPT-2's and Llama 3's) to use instead of PATH's")
      ->check(CLI::ExistingFile);
  cmd->add_option("--device", o->device,
                  "cpu (fp32, the reference kernels) or cuda[:N] (GPU N, 0 by default: bf16 weights and KV cache, "
                  "fp32 accumulation)")
      ->check(device_flag_validator())
      ->capture_default_str();
  cmd->add_option("--format", o->format, "text (the prompt and its continuation), or json (one object alone on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([o, prompt] { run_sample(*o, prompt->count() > 0); });
}

}  // namespace conveyor
