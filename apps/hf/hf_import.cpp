#include "apps/hf/hf_import.hpp"

#include <filesystem>
#include <yaml-cpp/yaml.h>

#include "actors/checkpoint/atomic_file.hpp"
#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/layout.hpp"
#include "apps/config/config_keys.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/hf/new_folder.hpp"
#include "kernels/common/error.hpp"
#include "kernels/model/hf_weights.hpp"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// The model keys of `m`'s architecture (the Llama ones only for a Llama: the others must
// keep their defaults for GPT-2), and one pipeline stage, which any model has room for.
YAML::Node import_config_yaml(const GptConfig& m) {
  std::vector<std::string> keys = {"model.arch",  "model.layers", "model.d_model",       "model.heads",
                                   "model.seq_len", "model.vocab", "model.tie_embeddings"};
  if (m.arch == ModelArch::llama) {
    keys.insert(keys.end(), {"model.kv_heads", "model.ffn_dim", "model.rope_theta", "model.rope_scaling"});
    if (m.rope_scaling == RopeScaling::llama3)
      keys.insert(keys.end(), {"model.rope_scaling_factor", "model.rope_low_freq_factor",
                               "model.rope_high_freq_factor", "model.rope_original_max_position"});
    keys.push_back("model.norm_eps");
  }
  RunConfig c;
  c.model = m;
  YAML::Node root;
  for (const auto& k : keys) root["model"][k.substr(6)] = find_config_key(k)->get(c);
  root["pipeline"]["stages"] = 1;
  // A vocabulary below a byte's or above uint16's needs token files of its width.
  if (m.vocab < 256 || m.vocab > 65536) {
    root["data"]["format"] = "tokens";
    root["data"]["token_bytes"] = m.vocab > 65536 ? 4 : 2;
  }
  return root;
}

std::string emit(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

HfImportResult import_hf_folder(const HfImportOptions& o) {
  const fs::path out = new_folder_path(o.out);
  const HfFolder folder(o.hf_dir);
  // The config as `conveyor train` would load it, checked before any tensor: validation
  // refuses what conveyor cannot run (say a head size that rotary cannot split), naming
  // the model key.
  const HfModelConfig hf = parse_hf_config(folder.config(), folder.dir() + "/" + kHfConfigFile, o.seq_len);
  const YAML::Node yaml = import_config_yaml(hf.model);
  const std::string yaml_text = emit(yaml);
  RunConfig config;
  try {
    config = parse_run_config(YAML::Load(yaml_text), o.hf_dir + "/config.json as conveyor's config");
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + " (from " + hf.architecture + "'s config.json)");
  }
  HfWeights w = read_hf_weights(folder, o.seq_len);
  const std::string source_line = "# conveyor hf import: " + w.config.architecture + " from " +
                                  fs::absolute(o.hf_dir).lexically_normal().string() + "\n";

  HfImportResult r;
  r.architecture = w.config.architecture;
  r.model = config.model;
  r.max_positions = w.config.max_positions;
  r.out = out.string();
  r.checkpoint = (out / checkpoint::step_dir_name(0)).string();
  r.config_file = (out / "config.yaml").string();
  r.tensors = static_cast<int>(w.params.size());
  for (const auto& p : w.params) {
    r.parameters += static_cast<std::uint64_t>(p.tensor.numel());
    r.bytes += p.tensor.bytes();
  }
  for (const auto& [dtype, n] : w.dtypes) r.dtypes[dtype] = n;
  r.ignored = static_cast<int>(w.ignored.size());

  checkpoint::Snapshot snap;
  auto& m = snap.manifest;
  m.step = 0;
  m.optimizer_steps = 0;
  m.seed = config.train.seed;
  m.schedule = find_config_key("pipeline.schedule")->get(config).as<std::string>();
  m.stages = 1;
  m.partition_halves = {2 * config.model.layers};
  m.config = source_line + to_yaml(config);
  snap.shards.push_back({0, std::move(w.params), nullptr, nullptr});

  write_new_folder(out, [&](const fs::path& tmp) {
    auto& files = checkpoint::posix_filesystem();
    checkpoint::write_checkpoint(files, tmp.string(), snap, 1);
    checkpoint::write_file_atomically(files, (tmp / "config.yaml").string(), [&](const checkpoint::ByteSink& sink) {
      const std::string text = source_line + "# Train from these weights: conveyor train " + r.config_file +
                               " --resume " + r.out + "\n" + yaml_text;
      sink(text.data(), text.size());
    });
  });
  return r;
}

}  // namespace conveyor
