// Hugging Face model folders: one file or shards with an index, F32, BF16 and F16 read as
// f32 exactly, and every way the folder can disagree with itself named.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kernels/common/error.hpp"
#include "kernels/io/hf_folder.hpp"
#include "kernels/tensor/f16.hpp"
#include "tests/support/hf_model_folder.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

std::string error_of(const std::string& dir) {
  try {
    HfFolder folder(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void check_reads_back(const HfFolder& folder, const std::vector<HfTensor>& tensors) {
  REQUIRE(folder.tensors().size() == tensors.size());
  for (const auto& t : tensors) {
    INFO(t.name);
    const Tensor got = folder.read_f32(t.name);
    CHECK(got.shape().dims() == t.shape);
    REQUIRE(static_cast<std::size_t>(got.numel()) == t.values.size());
    for (std::size_t i = 0; i < t.values.size(); ++i)
      if (got.f32()[i] != t.values[i]) FAIL_CHECK(t.name << "[" << i << "] " << got.f32()[i] << " != " << t.values[i]);
  }
}

}  // namespace

TEST_CASE("f16_bits_to_float is exact on normals, subnormals, zeros, infinities and NaN") {
  CHECK(f16_bits_to_float(0x3c00) == 1.0f);
  CHECK(f16_bits_to_float(0xc000) == -2.0f);
  CHECK(f16_bits_to_float(0x7bff) == 65504.0f);
  CHECK(f16_bits_to_float(0x0400) == std::ldexp(1.0f, -14));
  CHECK(f16_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_bits_to_float(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(f16_bits_to_float(0x3555) == std::ldexp(static_cast<float>(0x555 | 0x400), -12));  // 0.333...
  CHECK(f16_bits_to_float(0x0000) == 0.0f);
  CHECK(std::signbit(f16_bits_to_float(0x8000)));
  CHECK(f16_bits_to_float(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(f16_bits_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f16_bits_to_float(0x7e00)));
}

TEST_CASE("one model.safetensors of each dtype reads back exactly as f32") {
  for (const std::string dtype : {"F32", "BF16", "F16"}) {
    INFO(dtype);
    TempDir dir;
    const auto config = small_llama_config();
    const auto tensors = llama_tensors(config, dtype, 7);
    write_hf_folder(dir.path() / "m", config, tensors, dtype);
    const HfFolder folder(dir / "m");
    CHECK(folder.config().at("hidden_size") == 32);
    CHECK(folder.files().size() == 1);
    for (const auto& [name, info] : folder.tensors()) CHECK(info.dtype == dtype);
    check_reads_back(folder, tensors);
  }
}

TEST_CASE("shards with model.safetensors.index.json read as one folder") {
  TempDir dir;
  const auto config = small_llama_config();
  const auto tensors = llama_tensors(config, "BF16", 11);
  write_hf_folder(dir.path() / "m", config, tensors, "BF16", 3);
  const HfFolder folder(dir / "m");
  CHECK(folder.files().size() == 3);
  CHECK(contains(folder.tensors().at("model.norm.weight").file, "-of-00003.safetensors"));
  check_reads_back(folder, tensors);
}

TEST_CASE("a folder that disagrees with itself is an InputError naming the file and the tensor") {
  TempDir dir;
  const auto config = small_llama_config();
  const auto tensors = llama_tensors(config, "F32", 3);

  CHECK(contains(error_of(dir / "absent"), "no such folder"));
  write_text_file(dir / "config.json", "{}");
  CHECK(contains(error_of(dir.path().string()), "holds neither model.safetensors nor model.safetensors.index.json"));
  write_text_file(dir / "config.json", "{not json");
  CHECK(contains(error_of(dir.path().string()), "config.json: not valid JSON"));

  // An index naming a file that lacks the tensor; a shard holding one the index omits.
  const fs::path sharded = dir.path() / "sharded";
  write_hf_folder(sharded, config, tensors, "F32", 2);
  auto index = nlohmann::json::parse(read_file_text((sharded / "model.safetensors.index.json").string()));
  const std::string moved = "model.layers.0.self_attn.q_proj.weight";
  const std::string was = index["weight_map"][moved];
  index["weight_map"][moved] = was == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                                            : "model-00001-of-00002.safetensors";
  write_text_file((sharded / "model.safetensors.index.json").string(), index.dump());
  CHECK(contains(error_of(sharded.string()), "tensor '" + moved + "' is listed in model.safetensors.index.json as in"));
  index["weight_map"].erase(moved);
  write_text_file((sharded / "model.safetensors.index.json").string(), index.dump());
  CHECK(contains(error_of(sharded.string()), "tensor '" + moved + "' is not listed in model.safetensors.index.json"));

  // A dtype the format has but conveyor does not import.
  const fs::path f64 = dir.path() / "f64";
  fs::create_directories(f64);
  write_text_file((f64 / "config.json").string(), config.dump());
  std::string header = R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  write_text_file((f64 / "model.safetensors").string(), bytes + header + std::string(8, '\0'));
  CHECK(contains(error_of(f64.string()), "tensor 'w' is F64, conveyor imports F32, BF16 and F16"));
}
