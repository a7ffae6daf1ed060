// conveyor hf import HF_DIR --out OUT [--seq-len N] [--format text|json]
// conveyor hf export RUN_DIR|CKPT_DIR --out OUT [--dtype fp32|bf16] [--format text|json]
// import reads a Hugging Face model folder (LlamaForCausalLM or GPT2LMHeadModel: config.json
// and model.safetensors, or shards with model.safetensors.index.json; F32, BF16 or F16) into a
// new conveyor checkpoint folder that `train --resume OUT` starts from (apps/hf/hf_import.hpp);
// `train --init-from HF_DIR` reads one directly. export writes a run's or a checkpoint's
// weights as a Hugging Face folder that from_pretrained loads (apps/hf/hf_export.hpp).
// Progress goes to stderr; --format json prints one JSON summary alone on stdout. Bad input
// (an unknown architecture or rope scaling, a missing, unexpected or misshapen tensor, no
// checkpoint, an unknown --dtype, an existing --out) is one `error:` line and exit code 2,
// and OUT is not created.
//
// conveyor hf logits PATH --tokens TOKENS.safetensors [--out LOGITS.safetensors] [--format text|json]
// conveyor's logits and mean cross-entropy loss on given token rows, from a checkpoint, a
// run or a Hugging Face folder (as `train --init-from` takes them), computed by the CPU reference kernels with the whole model
// on one stage (apps/hf/checkpoint_logits.hpp): for comparisons with transformers
// (scripts/hf_reference_check.py). TOKENS holds "tokens", i32 (B, T + 1): the model reads
// [:, :T] and is scored on [:, 1:]. --out gets "logits", f32 (B, T, V); the loss goes to
// stdout (--format json: one JSON object alone, the loss with every digit).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/commands.hpp"
#include "apps/device_flag.hpp"
#include "apps/hf/checkpoint_logits.hpp"
#include "apps/hf/hf_export.hpp"
#include "apps/hf/hf_import.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor {
namespace {

struct HfOptions {
  HfImportOptions import;
  HfExportOptions exp;
  std::string format = "text";
};

nlohmann::json import_json(const HfImportResult& r) {
  const GptConfig& m = r.model;
  nlohmann::json model = {{"arch", std::string(model_arch_name(m.arch))},
                          {"layers", m.layers},
                          {"d_model", m.d_model},
                          {"heads", m.heads},
                          {"seq_len", m.seq_len},
                          {"vocab", m.vocab},
                          {"tie_embeddings", m.tie_embeddings}};
  if (m.arch == ModelArch::llama) {
    model["kv_heads"] = m.kv_head_count();
    model["ffn_dim"] = m.llama_ffn_dim();
    model["rope_theta"] = m.rope_theta;
    model["rope_scaling"] = std::string(rope_scaling_name(m.rope_scaling));
    model["norm_eps"] = m.norm_eps;
  }
  return {{"architecture", r.architecture}, {"model", model},         {"max_positions", r.max_positions},
          {"out", r.out},                   {"checkpoint", r.checkpoint}, {"config", r.config_file},
          {"tensors", r.tensors},           {"parameters", r.parameters}, {"bytes", r.bytes},
          {"dtypes", r.dtypes},             {"ignored", r.ignored}};
}

void run_import(const HfOptions& o) {
  fmt::print(stderr, "conveyor hf: importing {}\n", o.import.hf_dir);
  const HfImportResult r = import_hf_folder(o.import);
  fmt::print(stderr, "conveyor hf: {} ({} layers, d_model {}, seq_len {}) → {}: {} tensors, {:.1f}M parameters ({:.2f} GB f32)\n",
             r.architecture, r.model.layers, r.model.d_model, r.model.seq_len, r.out, r.tensors,
             static_cast<double>(r.parameters) / 1e6, static_cast<double>(r.bytes) / 1e9);
  fmt::print(stderr, "conveyor hf: train from it with: conveyor train {} --resume {}\n", r.config_file, r.out);
  if (o.format == "json")
    fmt::print("{}\n", import_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

nlohmann::json export_json(const HfExportResult& r) {
  return {{"architecture", r.architecture}, {"from", r.from},       {"source", r.source},
          {"step", r.step},                 {"out", r.out},         {"dtype", r.dtype},
          {"tensors", r.tensors},           {"parameters", r.parameters}, {"bytes", r.bytes}};
}

void run_export(const HfOptions& o) {
  fmt::print(stderr, "conveyor hf: exporting {}\n", o.exp.from);
  const HfExportResult r = export_hf_folder(o.exp);
  fmt::print(stderr, "conveyor hf: {} (step {}) → {} {}: {} tensors, {:.1f}M parameters, {} ({:.2f} GB)\n", r.from,
             r.step, r.architecture, r.out, r.tensors, static_cast<double>(r.parameters) / 1e6, r.dtype,
             static_cast<double>(r.bytes) / 1e9);
  if (o.format == "json")
    fmt::print("{}\n", export_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

struct LogitsOptions {
  std::string weights;
  std::string tokens;
  std::string out;
  std::string device = "cpu";
  std::string format = "text";
};

void run_logits(const LogitsOptions& o) {
  const Tensor tokens = read_token_rows(o.tokens);
  CheckpointModel model = load_checkpoint_model(o.weights);
  fmt::print(stderr, "conveyor hf: {} (step {}), {} rows of {} positions\n", model.path, model.step,
             tokens.dim(0), tokens.dim(1) - 1);
  const Device device = parse_device_flag(o.device).value();  // checked by the option
  const TokenLogits r = checkpoint_logits(model, tokens, device);
  if (!o.out.empty()) write_safetensors(o.out, {{"logits", r.logits}}, {{"weights", model.path}});
  if (o.format == "json") {
    const nlohmann::json j = {{"path", model.path},
                              {"source", model.source},
                              {"step", model.step},
                              {"arch", std::string(model_arch_name(model.model.arch))},
                              {"device", device.str()},
                              {"batch", r.logits.dim(0)},
                              {"positions", r.logits.dim(1)},
                              {"vocab", r.logits.dim(2)},
                              {"loss", r.loss},
                              {"out", o.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.out)}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("loss {:.9g} over {} positions\n", r.loss, r.logits.dim(0) * r.logits.dim(1));
  }
}

}  // namespace

void add_hf_command(CLI::App& app) {
  auto* hf = app.add_subcommand("hf", "Hugging Face model folders: import one as a conveyor checkpoint, or export a run's weights as one");
  hf->require_subcommand(1);
  auto opt = std::make_shared<HfOptions>();
  auto* imp = hf->add_subcommand(
      "import", "Read a Hugging Face model folder (LlamaForCausalLM or GPT2LMHeadModel; F32, BF16 or F16 "
                "safetensors, one file or sharded) into a new checkpoint folder that `train --resume` starts from");
  imp->add_option("hf_dir", opt->import.hf_dir, "The Hugging Face folder (config.json, model.safetensors or its index)")
      ->required();
  imp->add_option("--out", opt->import.out, "The checkpoint folder to create (must not exist)")->required();
  imp->add_option("--seq-len", opt->import.seq_len,
                  "Cap model.seq_len below config.json's maximum positions (GPT-2 keeps wpe's first rows); "
                  "default: the maximum")
      ->check(CLI::PositiveNumber);
  imp->add_option("--format", opt->format, "text, or json (a summary alone on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  imp->callback([opt] { run_import(*opt); });

  auto* exp = hf->add_subcommand(
      "export", "Write the weights of a run (its final weights, else its newest checkpoint) or of a checkpoint as a "
                "Hugging Face model folder (config.json and model.safetensors) that transformers' from_pretrained "
                "loads as LlamaForCausalLM or GPT2LMHeadModel");
  exp->add_option("from", opt->exp.from,
                  "A run folder, a checkpoint.dir (its newest intact checkpoint) or one step-N folder")
      ->required();
  exp->add_option("--out", opt->exp.out, "The Hugging Face folder to create (must not exist)")->required();
  exp->add_option("--dtype", opt->exp.dtype, "fp32, or bf16 (rounded to nearest even; half the size)")
      ->capture_default_str();
  exp->add_option("--format", opt->format, "text, or json (a summary alone on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  exp->callback([opt] { run_export(*opt); });

  auto lopt = std::make_shared<LogitsOptions>();
  auto* logits = hf->add_subcommand(
      "logits", "conveyor's logits and loss on given token rows, from a checkpoint, with the whole model on one "
                "stage (the CPU reference kernels, or the GPU's with --device cuda): for comparisons with "
                "transformers");
  logits->add_option("weights", lopt->weights,
                     "A checkpoint (a step folder, or a folder of them such as hf import's --out: its newest that "
                     "verifies), a run folder (its final weights, else its newest checkpoint) or a Hugging Face folder")
      ->required();
  logits->add_option("--tokens", lopt->tokens,
                     "A safetensors file holding \"tokens\", i32 (B, T + 1): the model reads [:, :T] and is scored "
                     "on [:, 1:]")
      ->required();
  logits->add_option("--out", lopt->out, "Write \"logits\", f32 (B, T, V), to this safetensors file");
  logits->add_option("--device", lopt->device,
                     "cpu (fp32 reference kernels), or cuda / cuda:N (bf16, the CUDA stage model)")
      ->check(device_flag_validator())
      ->capture_default_str();
  logits->add_option("--format", lopt->format, "text, or json (the loss and shapes alone on stdout)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  logits->callback([lopt] { run_logits(*lopt); });
}

}  // namespace conveyor
