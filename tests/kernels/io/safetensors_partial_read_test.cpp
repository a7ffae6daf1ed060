// Reading part of a safetensors file: the header alone (read_safetensors_index) and some
// tensors only (read_safetensors_subset), as a resume reads the shards of its own stages.
// The file of the first case holds a 64 GiB tensor as a sparse file: neither read may
// allocate or read it (a whole read could not finish on a 24 GiB machine).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/common/error.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using conveyor::testing::TempDir;

namespace {

constexpr std::int64_t kHugeRows = 16, kHugeCols = std::int64_t{1} << 30;  // 64 GiB of f32

// "small" (2 floats) then "huge" (64 GiB, a hole in the file) then "ids" (2 i32).
std::string sparse_file(const TempDir& dir) {
  const std::uint64_t huge_bytes = static_cast<std::uint64_t>(kHugeRows * kHugeCols) * 4;
  std::string json = R"({"__metadata__":{"k":"v"},"small":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("huge":{"dtype":"F32","shape":[16,1073741824],"data_offsets":[8,)" +
                     std::to_string(8 + huge_bytes) + R"(]},"ids":{"dtype":"I32","shape":[2],"data_offsets":[)" +
                     std::to_string(8 + huge_bytes) + "," + std::to_string(16 + huge_bytes) + "]}}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  const std::uint64_t n = json.size();
  std::memcpy(head.data(), &n, 8);
  const float small[2] = {1.5f, -2.25f};
  const std::int32_t ids[2] = {7, -9};
  head += json + std::string(reinterpret_cast<const char*>(small), sizeof small);
  const std::string path = dir / "sparse.safetensors";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()));
  REQUIRE(::pwrite(fd, ids, sizeof ids, static_cast<off_t>(head.size() + huge_bytes)) == sizeof ids);
  ::close(fd);
  return path;
}

}  // namespace

TEST_CASE("the index and a subset read neither allocate nor read the tensors they leave out") {
  TempDir dir;
  const auto path = sparse_file(dir);

  const auto index = read_safetensors_index(path);
  CHECK(index.metadata.at("k") == "v");
  REQUIRE(index.tensors.size() == 3);
  CHECK(index.tensors[0].name == "small");  // file order
  CHECK(index.tensors[1].name == "huge");
  CHECK(index.tensors[1].shape == Shape{kHugeRows, kHugeCols});
  CHECK(index.tensors[1].dtype == DType::f32);
  CHECK(index.tensors[2].name == "ids");
  CHECK(index.tensors[2].dtype == DType::i32);

  const auto some = read_safetensors_subset(path, {"ids", "small"});
  REQUIRE(some.size() == 2);
  CHECK(some[0].name == "small");
  CHECK(some[0].tensor.f32()[0] == 1.5f);
  CHECK(some[0].tensor.f32()[1] == -2.25f);
  CHECK(some[1].name == "ids");
  CHECK(some[1].tensor.i32()[0] == 7);
  CHECK(some[1].tensor.i32()[1] == -9);
}

TEST_CASE("a subset read names a tensor the file lacks, the index checks the header as a whole read does") {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  Tensor t = Tensor::zeros({3}, DType::f32);
  for (int i = 0; i < 3; ++i) t.f32()[i] = 0.5f + static_cast<float>(i);
  write_safetensors(path, {{"a", t}, {"b", t}});
  CHECK(read_safetensors_subset(path, {}).empty());
  CHECK_THROWS_WITH_AS(read_safetensors_subset(path, {"a", "c"}), doctest::Contains("holds no tensor 'c'"),
                       InputError);

  // One byte short: the data no longer covers the header's offsets, for the index too.
  const auto cut = dir / "cut.safetensors";
  std::filesystem::copy_file(path, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 1);
  CHECK_THROWS_WITH_AS(read_safetensors_index(cut), doctest::Contains("outside the data section"), InputError);
  CHECK_THROWS_AS(read_safetensors_subset(cut, {"a"}), InputError);
}
