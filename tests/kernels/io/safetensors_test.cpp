// safetensors: round trips, the exact bytes we write, a file built by hand, and every way
// a file can lie about its contents.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/error.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace conveyor;
using conveyor::testing::TempDir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 8-byte little-endian header length, then the header, then the data.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

template <class T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

Tensor f32_tensor(Shape shape, float first) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = first + static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("tensors and metadata survive a write and a read") {
  TempDir dir;
  const auto path = (dir.path() / "w.safetensors").string();
  Tensor ids = Tensor::zeros({2, 3}, DType::i32);
  for (int i = 0; i < 6; ++i) ids.i32()[i] = -i * 1000;
  Tensor half = Tensor::zeros({5}, DType::bf16);
  for (int i = 0; i < 5; ++i) static_cast<std::uint16_t*>(half.raw())[i] = static_cast<std::uint16_t>(0x3f80 + i);
  const std::vector<NamedTensor> in = {{"z.weight", f32_tensor({4, 2}, 0.5f)},
                                       {"a.ids", ids},
                                       {"bf", half},
                                       {"scalar", f32_tensor({}, 3.25f)},
                                       {"empty", Tensor::zeros({0, 7}, DType::f32)}};
  write_safetensors(path, in, {{"step", "12"}, {"format", "pt"}});

  const auto out = read_safetensors_with_metadata(path);
  CHECK(out.metadata == std::map<std::string, std::string>{{"step", "12"}, {"format", "pt"}});
  REQUIRE(out.tensors.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO(in[i].name);
    CHECK(out.tensors[i].name == in[i].name);  // file order is write order
    CHECK(out.tensors[i].tensor.shape() == in[i].tensor.shape());
    CHECK(out.tensors[i].tensor.dtype() == in[i].tensor.dtype());
    CHECK(std::memcmp(out.tensors[i].tensor.raw(), in[i].tensor.raw(), in[i].tensor.bytes()) == 0);
  }
  CHECK(dir.entries() == 1);  // no temporary file left behind
}

TEST_CASE("the writer's bytes are the documented layout") {
  TempDir dir;
  const auto path = (dir.path() / "w.safetensors").string();
  write_safetensors(path, {{"w", f32_tensor({2}, 1.0f)}});
  const std::string bytes = slurp(path);
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string header = json + std::string((8 - json.size() % 8) % 8, ' ');
  CHECK(header.size() % 8 == 0);
  CHECK(bytes == safetensors_bytes(header, raw_bytes(std::vector<float>{1.0f, 2.0f})));
}

TEST_CASE("a file built by hand decodes") {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"who":"hand"},"b":{"dtype":"I32","shape":[2,1],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = raw_bytes(std::vector<float>{1.5f, -2.0f}) + raw_bytes(std::vector<std::int32_t>{7, -9});
  const auto path = dir.write("hand.safetensors", safetensors_bytes(header, data));
  const auto out = read_safetensors_with_metadata(path);
  CHECK(out.metadata.at("who") == "hand");
  REQUIRE(out.tensors.size() == 2);
  CHECK(out.tensors[0].name == "a");
  CHECK(out.tensors[0].tensor.shape() == Shape{2});
  CHECK(out.tensors[0].tensor.f32()[0] == 1.5f);
  CHECK(out.tensors[0].tensor.f32()[1] == -2.0f);
  CHECK(out.tensors[1].name == "b");
  CHECK(out.tensors[1].tensor.shape() == Shape{2, 1});
  CHECK(out.tensors[1].tensor.i32()[0] == 7);
  CHECK(out.tensors[1].tensor.i32()[1] == -9);
}

TEST_CASE("writing over an existing file replaces it whole") {
  TempDir dir;
  const auto path = (dir.path() / "w.safetensors").string();
  write_safetensors(path, {{"old", f32_tensor({100}, 0.0f)}});
  write_safetensors(path, {{"new", f32_tensor({1}, 9.0f)}});
  const auto out = read_safetensors(path);
  REQUIRE(out.size() == 1);
  CHECK(out[0].name == "new");
  CHECK(dir.entries() == 1);
}

TEST_CASE("a failed write throws, names the file and leaves nothing behind") {
  TempDir dir;
  SUBCASE("the folder does not exist") {
    const auto path = (dir.path() / "missing" / "w.safetensors").string();
    try {
      write_safetensors(path, {{"w", f32_tensor({2}, 1.0f)}});
      FAIL("no error");
    } catch (const std::runtime_error& e) {
      INFO(e.what());
      CHECK(has(e.what(), path));
      CHECK(has(e.what(), "No such file"));
    }
    CHECK(dir.entries() == 0);
  }
  SUBCASE("the target is a folder, so the final rename fails") {
    const auto target = dir.path() / "taken";
    fs::create_directories(target / "inside");
    CHECK_THROWS_AS(write_safetensors(target.string(), {{"w", f32_tensor({2}, 1.0f)}}),
                    std::runtime_error);
    CHECK(dir.entries() == 1);  // only the folder: the temporary file was removed
  }
}

TEST_CASE("the writer refuses duplicate or reserved names") {
  TempDir dir;
  const auto path = (dir.path() / "w.safetensors").string();
  CHECK_THROWS_AS(write_safetensors(path, {{"a", f32_tensor({1}, 0)}, {"a", f32_tensor({1}, 0)}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_safetensors(path, {{"__metadata__", f32_tensor({1}, 0)}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(write_safetensors(path, {{"a", Tensor()}}), std::invalid_argument);
  CHECK(dir.entries() == 0);
}

TEST_CASE("invalid safetensors files are rejected with the file named") {
  TempDir dir;
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string good_data = raw_bytes(std::vector<float>{1.0f, 2.0f});
  auto rejected = [&](const std::string& bytes, const std::string& why) {
    const auto path = dir.write("bad.safetensors", bytes);
    const auto msg = input_error([&] { read_safetensors(path); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, why));
  };
  SUBCASE("truncated data") {
    rejected(safetensors_bytes(good_header, good_data.substr(0, 6)), "outside the data section");
  }
  SUBCASE("shorter than the header length field") { rejected("abc", "too short"); }
  SUBCASE("header length past the end") {
    rejected(safetensors_bytes(good_header, good_data).substr(0, 20), "runs past the end");
  }
  SUBCASE("bad JSON") { rejected(safetensors_bytes(R"({"a": {)", good_data), "not valid JSON"); }
  SUBCASE("header not an object") { rejected(safetensors_bytes("[1, 2]", ""), "not a JSON object"); }
  SUBCASE("offsets out of range") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", good_data),
             "outside the data section");
  }
  SUBCASE("offsets that do not match the shape") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                               good_data + good_data),
             "needs 12");
  }
  SUBCASE("overlapping tensors") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                               good_data + good_data),
             "overlap");
  }
  SUBCASE("a tensor named twice (JSON parsers keep the last)") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                               good_data + good_data),
             "the header names 'a' twice");
  }
  SUBCASE("data bytes no tensor covers: a hole, trailing bytes") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                               good_data + "0000" + good_data),
             "data bytes [8, 12) belong to no tensor");
    rejected(safetensors_bytes(good_header, good_data + "xyz"), "3 data bytes after the last tensor");
  }
  SUBCASE("an unsupported dtype") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", good_data),
             "F16");
  }
  SUBCASE("a negative dimension") {
    rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", good_data),
             "non-negative");
  }
  SUBCASE("metadata that is not strings") {
    rejected(safetensors_bytes(R"({"__metadata__":{"n":3}})", ""), "__metadata__");
  }
  SUBCASE("a missing file") {
    const auto path = (dir.path() / "none.safetensors").string();
    const auto msg = input_error([&] { read_safetensors(path); });
    CHECK(has(msg, path));
  }
}
