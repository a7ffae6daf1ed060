// conveyor hf import HF_DIR --out OUT [--seq-len N] [--format text|json]
// Reads a Hugging Face model folder (LlamaForCausalLM or GPT2LMHeadModel: config.json and
// model.safetensors, or shards with model.safetensors.index.json; F32, BF16 or F16) into a
// new conveyor checkpoint folder that `train --resume OUT` starts from (apps/hf/hf_import.hpp).
// Progress goes to stderr; --format json prints one JSON summary alone on stdout. Bad input
// (an unknown architecture or rope scaling, a missing, unexpected or misshapen tensor, an
// existing --out) is one `error:` line and exit code 2, and OUT is not created.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/commands.hpp"
#include "apps/hf/hf_import.hpp"

namespace conveyor {
namespace {

struct HfOptions {
  HfImportOptions import;
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

}  // namespace

void add_hf_command(CLI::App& app) {
  auto* hf = app.add_subcommand("hf", "Hugging Face model folders: import one as a conveyor checkpoint");
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
}

}  // namespace conveyor
