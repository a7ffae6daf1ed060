#include "kernels/optim/adamw.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

namespace conveyor {
namespace {

Param make_param(std::string name, std::vector<float> value, std::vector<float> grad, bool decay) {
  Param p;
  p.name = std::move(name);
  p.value = Tensor::zeros({static_cast<std::int64_t>(value.size())});
  p.grad = Tensor::zeros({static_cast<std::int64_t>(grad.size())});
  for (std::size_t i = 0; i < value.size(); ++i) {
    p.value.f32()[i] = value[i];
    p.grad.f32()[i] = grad[i];
  }
  p.decay = decay;
  return p;
}

TEST_CASE("one AdamW step matches a hand-computed step") {
  // After one step mhat = g and vhat = g^2, so the update is lr * (sign(g) + wd * p).
  std::vector<Param> params{make_param("w", {1.0f, -2.0f, 0.5f}, {0.1f, -0.2f, 0.3f}, true)};
  AdamWState state;
  const AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  adamw_step(params, state, config, 0.1f, /*grad_scale=*/0.5f);
  CHECK(state.t == 1);
  const float* p = params[0].value.f32();
  CHECK(p[0] == doctest::Approx(1.0 - 0.1 * (1.0 + 0.1 * 1.0)).epsilon(1e-6));     // 0.89
  CHECK(p[1] == doctest::Approx(-2.0 - 0.1 * (-1.0 + 0.1 * -2.0)).epsilon(1e-6));  // -1.88
  CHECK(p[2] == doctest::Approx(0.5 - 0.1 * (1.0 + 0.1 * 0.5)).epsilon(1e-6));     // 0.395
  // The moments hold the scaled gradient; the gradient itself is not modified.
  CHECK(state.m[0].f32()[1] == doctest::Approx(0.1 * -0.1).epsilon(1e-6));
  CHECK(state.v[0].f32()[1] == doctest::Approx(0.05 * 0.01).epsilon(1e-6));
  CHECK(params[0].grad.f32()[1] == -0.2f);
}

TEST_CASE("AdamW bias correction uses the step count (two steps against a double reference)") {
  const std::vector<double> g1{0.3, -0.1}, g2{-0.2, 0.4};
  std::vector<Param> params{make_param("w", {0.7f, -0.3f}, {0.3f, -0.1f}, true)};
  AdamWState state;
  const AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  adamw_step(params, state, config, 0.05f, 1.0f);
  params[0].grad.f32()[0] = static_cast<float>(g2[0]);
  params[0].grad.f32()[1] = static_cast<float>(g2[1]);
  adamw_step(params, state, config, 0.05f, 1.0f);
  CHECK(state.t == 2);
  double p[2] = {0.7, -0.3}, m[2] = {0, 0}, v[2] = {0, 0};
  for (int t = 1; t <= 2; ++t) {
    const auto& g = t == 1 ? g1 : g2;
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.95 * v[i] + 0.05 * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.95, t));
      p[i] -= 0.05 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.1 * p[i]);
    }
  }
  CHECK(params[0].value.f32()[0] == doctest::Approx(p[0]).epsilon(1e-6));
  CHECK(params[0].value.f32()[1] == doctest::Approx(p[1]).epsilon(1e-6));
}

TEST_CASE("AdamW applies no weight decay to decay=false params") {
  std::vector<Param> params{make_param("ln.weight", {1.5f, -2.0f}, {0.0f, 0.0f}, false),
                            make_param("fc.weight", {1.5f, -2.0f}, {0.0f, 0.0f}, true)};
  AdamWState state;
  adamw_step(params, state, AdamWConfig{0.9f, 0.95f, 1e-8f, 0.5f}, 0.1f, 1.0f);
  CHECK(params[0].value.f32()[0] == 1.5f);  // zero gradient, no decay: unchanged
  CHECK(params[0].value.f32()[1] == -2.0f);
  CHECK(params[1].value.f32()[0] == doctest::Approx(1.5 * (1 - 0.1 * 0.5)));
  CHECK(params[1].value.f32()[1] == doctest::Approx(-2.0 * (1 - 0.1 * 0.5)));
}

TEST_CASE("grad_square_sum adds squares in double") {
  const Param p = make_param("w", {0, 0, 0}, {1.0f, -2.0f, 3.0f}, true);
  CHECK(grad_square_sum(p) == 14.0);
}

TEST_CASE("clip_scale clips only above a positive max norm") {
  CHECK(clip_scale(2.0, 1.0) == doctest::Approx(1.0 / (2.0 + 1e-6)));
  CHECK(clip_scale(0.5, 1.0) == 1.0f);
  CHECK(clip_scale(1.0, 1.0) == 1.0f);
  CHECK(clip_scale(5.0, 0.0) == 1.0f);
  CHECK(clip_scale(5.0, -1.0) == 1.0f);
}

TEST_CASE("adamw_step refuses state built for other params") {
  std::vector<Param> params{make_param("w", {1.0f}, {1.0f}, true)};
  AdamWState state;
  adamw_step(params, state, {}, 0.1f, 1.0f);
  params.push_back(make_param("b", {1.0f}, {1.0f}, false));
  CHECK_THROWS_AS(adamw_step(params, state, {}, 0.1f, 1.0f), std::invalid_argument);
}

}  // namespace
}  // namespace conveyor
