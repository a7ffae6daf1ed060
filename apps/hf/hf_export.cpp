#include "apps/hf/hf_export.hpp"

#include <filesystem>

#include "actors/checkpoint/atomic_file.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "apps/checkpoint/checkpoint_inspect.hpp"
#include "apps/hf/model_weights.hpp"
#include "apps/hf/new_folder.hpp"
#include "kernels/common/error.hpp"
#include "kernels/io/hf_folder.hpp"
#include "kernels/model/hf_config.hpp"
#include "kernels/model/hf_export_tensors.hpp"
#include "kernels/tensor/bf16_tensor.hpp"

namespace conveyor {

namespace fs = std::filesystem;

HfExportResult export_hf_folder(const HfExportOptions& o) {
  if (o.dtype != "fp32" && o.dtype != "bf16")
    throw InputError("--dtype " + o.dtype + ": not a dtype to export (fp32 or bf16)");
  const fs::path out = new_folder_path(o.out);
  // A checkpoint's files are immutable once its manifest exists (docs/CHECKPOINTS.md).
  if (const auto inside = checkpoint_folder_holding((out / kHfConfigFile).string()))
    throw InputError("--out " + o.out + ": is inside the checkpoint folder " + *inside +
                     ": nothing is ever written into a checkpoint; choose a folder elsewhere");
  ModelWeights w = read_model_weights(o.from, "hf export");
  if (w.source == ModelWeights::Source::hf_folder)
    throw InputError("hf export " + o.from + ": is a Hugging Face folder already (give a run folder or a checkpoint)");
  auto tensors = hf_export_tensors(w.model, w.weights);
  w.weights.clear();  // the export's copies are all that is needed from here

  const bool bf16 = o.dtype == "bf16";
  const auto config = hf_config_json(w.model, bf16 ? "bfloat16" : "float32");
  HfExportResult r;
  r.architecture = config["architectures"][0].get<std::string>();
  r.from = w.path;
  r.source = source_name(w.source);
  r.step = w.step;
  r.model = w.model;
  r.out = out.string();
  r.dtype = o.dtype;
  r.tensors = static_cast<int>(tensors.size());
  for (auto& t : tensors) {
    r.parameters += static_cast<std::uint64_t>(t.tensor.numel());
    if (bf16) t.tensor = to_bf16(t.tensor);
  }
  write_new_folder(out, [&](const fs::path& tmp) {
    const std::string text = config.dump(2) + "\n";
    checkpoint::write_file_atomically(checkpoint::posix_filesystem(), (tmp / kHfConfigFile).string(),
                                      [&](const checkpoint::ByteSink& sink) { sink(text.data(), text.size()); });
    write_safetensors((tmp / kHfWeightsFile).string(), tensors, {{"format", "pt"}});
  });
  r.bytes = fs::file_size(out / kHfWeightsFile);
  return r;
}

}  // namespace conveyor
