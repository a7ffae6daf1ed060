// Staging a host bucket of several buffers as one flat array and back.
#include <doctest/doctest.h>

#include "tests/transport/collective/collective_test_support.hpp"
#include "transport/collective/gloo/host_bucket_staging.hpp"

namespace conveyor {
namespace {

using namespace collective_testing;

TEST_CASE("a staged bucket packs its buffers in order and unpacks them divided by the group size") {
  HostBuckets data = random_buckets({{3, 0, 5, 1}}, 9);
  const HostBuckets before = data;
  const GradientBucket bucket = data.bucket(0);
  std::vector<float> flat(bucket.elements());
  pack_bucket(bucket, flat);
  std::size_t at = 0;
  for (const auto& buffer : before.buffers[0])
    for (float v : buffer) CHECK(flat[at++] == v);
  CHECK(at == 9);

  for (auto& v : flat) v *= 3.0f;  // as if three equal ranks were summed
  unpack_bucket(flat, bucket, 3.0f);
  at = 0;
  for (std::size_t i = 0; i < before.buffers[0].size(); ++i)
    for (std::size_t k = 0; k < before.buffers[0][i].size(); ++k, ++at)
      CHECK(data.buffers[0][i][k] == flat[at] / 3.0f);

  std::vector<float> one = {1.5f, -3.0f};
  divide_in_place(one, 2.0f);
  CHECK(one == std::vector<float>{0.75f, -1.5f});
}

TEST_CASE("a bucket is checked against its layout: index, element count, dtype, null buffers") {
  const BucketLayout layout = {{4, DType::f32}, {2, DType::bf16}};
  float values[4] = {1, 2, 3, 4};
  CHECK_NOTHROW(check_bucket({0, {{values, 1}, {values + 1, 3}}}, layout, "g"));
  CHECK_THROWS_WITH(check_bucket({2, {}}, layout, "g"),
                    "g: bucket 2 is not in the layout (2 buckets)");
  CHECK_THROWS_WITH(check_bucket({0, {{values, 3}}}, layout, "g"),
                    "g: bucket 0 holds 3 elements, the layout says 4");
  CHECK_THROWS_WITH(check_bucket({1, {{values, 2}}}, layout, "g"),
                    "g: bucket 1: buffer 0 is f32, the bucket is bf16");
  CHECK_THROWS_WITH(check_bucket({0, {{nullptr, 4}}}, layout, "g"), "g: bucket 0: buffer 0 is null");
  CHECK(describe_layout(layout) == "f32x4 bf16x2");
}

}  // namespace
}  // namespace conveyor
