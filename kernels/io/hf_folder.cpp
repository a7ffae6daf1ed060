#include "kernels/io/hf_folder.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kernels/common/error.hpp"
#include "kernels/io/input_file.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/tensor/bf16.hpp"
#include "kernels/tensor/f16.hpp"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// A JSON file of the folder, parsed; InputError naming it when missing or not JSON.
nlohmann::json read_json(const std::string& path, const std::string& dir) {
  if (!fs::is_regular_file(path))
    throw InputError(dir + ": not a Hugging Face model folder: no " + fs::path(path).filename().string());
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw InputError(path + ": cannot be read");
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
}

bool readable_dtype(const std::string& dtype) { return dtype == "F32" || dtype == "BF16" || dtype == "F16"; }

}  // namespace

HfFolder::HfFolder(std::string dir) : dir_(std::move(dir)) {
  if (!fs::is_directory(dir_)) throw InputError(dir_ + ": no such folder (a Hugging Face model folder was expected)");
  config_ = read_json((fs::path(dir_) / kHfConfigFile).string(), dir_);
  if (!config_.is_object()) throw InputError(dir_ + "/" + kHfConfigFile + ": not a JSON object");

  const fs::path single = fs::path(dir_) / kHfWeightsFile;
  const fs::path index = fs::path(dir_) / kHfIndexFile;
  if (fs::exists(single)) {
    add_file(single.string(), nullptr);
    return;
  }
  if (!fs::exists(index)) {
    std::string hint;
    if (fs::exists(fs::path(dir_) / "pytorch_model.bin") || fs::exists(fs::path(dir_) / "pytorch_model.bin.index.json"))
      hint = " (pytorch_model.bin is PyTorch's pickle format, which conveyor does not read: save the model with "
             "safe_serialization)";
    throw InputError(dir_ + ": holds neither " + kHfWeightsFile + " nor " + kHfIndexFile + hint);
  }
  const nlohmann::json idx = read_json(index.string(), dir_);
  if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
    throw InputError(index.string() + ": has no \"weight_map\" object");
  std::map<std::string, std::string> weight_map;  // tensor -> file name
  std::set<std::string> files;
  for (const auto& [name, file] : idx["weight_map"].items()) {
    if (!file.is_string()) throw InputError(index.string() + ": weight_map[\"" + name + "\"] is not a file name");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      throw InputError(index.string() + ": weight_map[\"" + name + "\"] \"" + f +
                       "\" is not a plain file name in the folder");
    weight_map[name] = f;
    files.insert(f);
  }
  if (weight_map.empty()) throw InputError(index.string() + ": weight_map names no tensor");
  for (const auto& f : files) add_file((fs::path(dir_) / f).string(), &weight_map);
  for (const auto& [name, file] : weight_map)
    if (!tensors_.count(name))
      throw InputError(index.string() + ": tensor '" + name + "' is listed in " + file + ", which does not hold it");
}

void HfFolder::add_file(const std::string& file, const std::map<std::string, std::string>* weight_map) {
  files_.push_back(file);
  const std::string base = fs::path(file).filename().string();
  for (auto& e : read_safetensors_stored_index(file)) {
    if (weight_map) {
      const auto it = weight_map->find(e.name);
      if (it == weight_map->end())
        throw InputError(file + ": tensor '" + e.name + "' is not listed in " + kHfIndexFile + "'s weight_map");
      if (it->second != base)
        throw InputError(file + ": tensor '" + e.name + "' is listed in " + kHfIndexFile + " as in " + it->second);
    }
    if (!readable_dtype(e.dtype))
      throw InputError(file + ": tensor '" + e.name + "' is " + e.dtype + ", conveyor imports F32, BF16 and F16");
    if (tensors_.count(e.name))
      throw InputError(file + ": tensor '" + e.name + "' is also in " + tensors_.at(e.name).file);
    tensors_[e.name] = {file, e.dtype, e.shape, e.offset, e.bytes};
  }
}

Tensor HfFolder::read_f32(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw InputError(dir_ + ": holds no tensor '" + name + "'");
  const HfTensorInfo& t = it->second;
  const InputFile file(t.file, "safetensors file");
  Tensor out = Tensor::uninitialized(t.shape);
  const auto n = static_cast<std::size_t>(out.numel());
  if (t.dtype == "F32") {
    if (n > 0) file.read_at(out.raw(), t.bytes, t.offset);
    return out;
  }
  std::vector<std::uint16_t> half(n);
  if (n > 0) file.read_at(half.data(), t.bytes, t.offset);
  float* dst = out.f32();
  if (t.dtype == "BF16")
    for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(half[i]);
  else
    for (std::size_t i = 0; i < n; ++i) dst[i] = f16_bits_to_float(half[i]);
  return out;
}

}  // namespace conveyor
