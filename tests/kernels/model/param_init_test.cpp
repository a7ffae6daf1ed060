#include "kernels/model/param_init.hpp"

#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>

#include "kernels/model/gpt_stage.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using testing::bitwise_equal;
using testing::by_name;
using testing::make_stages;

const GptConfig kConfig{/*layers=*/4, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};

TEST_CASE("init depends only on seed and name, not on the slice") {
  const auto whole = by_name(make_stages(kConfig, {{0, 4, true, true}}, 9), false);
  const auto parts = by_name(
      make_stages(kConfig, {{0, 1, true, false}, {1, 2, false, false}, {3, 1, false, true}}, 9),
      false);
  const auto tail = by_name(make_stages(kConfig, {{2, 2, false, true}}, 9), false);
  REQUIRE(parts.size() == whole.size());
  for (const auto& [name, value] : whole) {
    CAPTURE(name);
    CHECK(bitwise_equal(parts.at(name), value));
    if (tail.count(name)) CHECK(bitwise_equal(tail.at(name), value));
  }
}

TEST_CASE("different seeds give different random parameters and the same constant ones") {
  const auto a = by_name(make_stages(kConfig, {{0, 4, true, true}}, 1), false);
  const auto b = by_name(make_stages(kConfig, {{0, 4, true, true}}, 2), false);
  for (const auto& [name, value] : a) {
    CAPTURE(name);
    const bool constant = name.find("ln") != std::string::npos || name.ends_with(".bias");
    CHECK(bitwise_equal(value, b.at(name)) == constant);
  }
}

TEST_CASE("init follows GPT-2: N(0, 0.02), residual projections scaled, norms 1 and biases 0") {
  const auto p = by_name(make_stages(kConfig, {{0, 4, true, true}}, 3), false);
  auto stddev = [](const Tensor& t) {
    double s = 0, s2 = 0;
    for (float x : t.f32_span()) {
      s += x;
      s2 += double(x) * x;
    }
    const double n = double(t.numel()), m = s / n;
    return std::sqrt(s2 / n - m * m);
  };
  CHECK(stddev(p.at("wte.weight")) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(stddev(p.at("blocks.1.mlp.fc1.weight")) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(stddev(p.at("blocks.1.mlp.fc2.weight")) ==
        doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  CHECK(stddev(p.at("blocks.2.attn.proj.weight")) ==
        doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.1));
  for (float x : p.at("blocks.0.ln1.weight").f32_span()) CHECK(x == 1.0f);
  for (float x : p.at("ln_f.bias").f32_span()) CHECK(x == 0.0f);
  for (float x : p.at("blocks.3.attn.qkv.bias").f32_span()) CHECK(x == 0.0f);
}

TEST_CASE("fill_normal draws standard normal values that depend on key and index only") {
  Tensor big = Tensor::zeros({100001});
  fill_normal(big, param_stream_key(5, "x"), 1.0);
  double s = 0, s2 = 0;
  for (float x : big.f32_span()) {
    s += x;
    s2 += double(x) * x;
  }
  const double n = double(big.numel());
  CHECK(std::abs(s / n) < 0.01);
  CHECK(s2 / n == doctest::Approx(1.0).epsilon(0.02));
  // A shorter tensor with the same key is a prefix of the longer one.
  Tensor small = Tensor::zeros({7});
  fill_normal(small, param_stream_key(5, "x"), 1.0);
  for (std::int64_t i = 0; i < 7; ++i) CHECK(small.f32()[i] == big.f32()[i]);
  CHECK(param_stream_key(5, "x") != param_stream_key(6, "x"));
  CHECK(param_stream_key(5, "x") != param_stream_key(5, "y"));
}

// Large tensors are filled by all cores (param_init.cpp): the bits may not depend on how
// many, and a small tensor (one thread) is still a prefix of a large one.
TEST_CASE("fill_normal gives the same bits on one thread and on several") {
  const std::int64_t n = 300001;  // above the parallel threshold, odd: a lone last element
  const int threads_before = omp_get_max_threads();
  std::vector<Tensor> fills;
  for (int threads : {1, 3, 8}) {
    omp_set_num_threads(threads);
    fills.push_back(Tensor::zeros({n}));
    fill_normal(fills.back(), param_stream_key(11, "w"), 0.02);
  }
  omp_set_num_threads(threads_before);
  CHECK(bitwise_equal(fills[0], fills[1]));
  CHECK(bitwise_equal(fills[0], fills[2]));
  Tensor prefix = Tensor::zeros({1001});
  fill_normal(prefix, param_stream_key(11, "w"), 0.02);
  for (std::int64_t i = 0; i < prefix.numel(); ++i) CHECK(prefix.f32()[i] == fills[0].f32()[i]);
  CHECK(fills[0].f32()[n - 1] != 0.0f);
}

}  // namespace
}  // namespace conveyor
