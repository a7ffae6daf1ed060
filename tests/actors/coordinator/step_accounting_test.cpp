#include <doctest/doctest.h>

#include <cmath>

#include "actors/coordinator/step_accounting.hpp"
#include "kernels/model/param_layout.hpp"

using namespace conveyor;

TEST_CASE("the mean loss is summed in micro-batch order whatever order reports arrive in") {
  StageReport a, b;
  a.losses = {{2, 0.3}, {0, 0.1}};
  b.losses = {{1, 0.2}, {3, 0.7}};
  const double ab = mean_loss({a, b}, 4), ba = mean_loss({b, a}, 4);
  CHECK(ab == ba);
  CHECK(ab == doctest::Approx(0.325));
  CHECK_THROWS(mean_loss({a}, 4));
  CHECK_THROWS(mean_loss({a, a}, 4));
}

TEST_CASE("the global gradient norm sums model stages in model order") {
  StageReport r0, r1;
  r0.grad_squares = {{1, {4.0, 1e-17}}};
  r1.grad_squares = {{0, {1.0}}, {2, {4.0}}};
  CHECK(global_grad_norm({r0, r1}) == global_grad_norm({r1, r0}));
  CHECK(global_grad_norm({r0, r1}) == doctest::Approx(3.0));
}

TEST_CASE("non-finite gradients are named by parameter, in model order, once across replicas") {
  GptConfig model;
  model.layers = 2;
  model.d_model = 32;
  model.heads = 2;
  model.seq_len = 16;
  model.vocab = 64;
  // Two model stages of one block each (in half blocks: 2 and 2).
  const Placement placement =
      make_placement({2, 2}, 2, 1, [](int rank, int) { return rank; });
  const auto names0 = stage_param_layout(model, placement.chunk_of(0).slice);
  const auto names1 = stage_param_layout(model, placement.chunk_of(1).slice);
  StageReport r0, r1, twin;
  r0.grad_squares = {{0, std::vector<double>(names0.size(), 1.0)}};
  r1.grad_squares = {{1, std::vector<double>(names1.size(), 1.0)}};
  CHECK(nonfinite_params({r0, r1}, model, placement).empty());
  r1.grad_squares[0].squares[3] = std::nan("");
  r0.grad_squares[0].squares[1] = INFINITY;
  twin = r1;  // a second replica reports the same averaged gradients
  const auto found = nonfinite_params({twin, r1, r0}, model, placement);
  REQUIRE(found.size() == 2);
  CHECK(found[0] == names0[1].name);
  CHECK(found[1] == names1[3].name);  // the deepest: where backward met it first
}

TEST_CASE("the measured bubble is the idle share of ranks over the compute span") {
  StageReport r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  r0.timings = {{{}, 0, 2'000'000}};            // busy 2 ms of 4
  r1.timings = {{{}, 2'000'000, 4'000'000}};    // busy 2 ms of 4
  const auto m = measure_bubble({r0, r1}, 2);
  CHECK(m.span_ms == doctest::Approx(4.0));
  CHECK(m.bubble == doctest::Approx(0.5));
}

TEST_CASE("the reduction cost of a step is the mean over its stage actors' reports") {
  std::vector<StageReport> reports(4);
  const double busy[] = {2.0, 4.0, 6.0, 8.0}, exposed[] = {0.5, 0.0, 1.5, 2.0};
  for (int r = 0; r < 4; ++r) {
    reports[r].rank = r;
    reports[r].allreduce_busy_ms = busy[r];
    reports[r].allreduce_exposed_ms = exposed[r];
  }
  const ReductionCost cost = reduction_cost(reports);
  CHECK(cost.busy_ms == 5.0);
  CHECK(cost.exposed_ms == 1.0);
  CHECK(reduction_cost({}).busy_ms == 0.0);
}
