// The pieces of the Prometheus text format that values from a run can break: label values
// with quotes, backslashes and newlines, and samples that are not finite numbers. And the
// bound on a curve's points.
#include <doctest/doctest.h>

#include "apps/watch/prometheus_text.hpp"
#include "apps/watch/run_status.hpp"

#include <cmath>
#include <limits>

using namespace conveyor::watch;

TEST_CASE("label values escape backslash, double quote and newline") {
  CHECK(escape_label_value("cuda:0") == "cuda:0");
  CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
}

TEST_CASE("samples spell NaN and the infinities as the format does") {
  CHECK(sample_value(std::nan("")) == "NaN");
  CHECK(sample_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(sample_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(sample_value(0.25) == "0.25");
  CHECK(std::stod(sample_value(1.0 / 3.0)) == 1.0 / 3.0);  // round-trips
}

TEST_CASE("a curve past its bound is thinned evenly and keeps its newest point") {
  std::vector<CurvePoint> curve;
  for (int i = 0; i < 11; ++i) curve.push_back({i, static_cast<double>(i)});
  thin_curve(curve, 10);
  CHECK(curve.size() <= 10);
  CHECK(curve.front().step == 0);
  CHECK(curve.back().step == 10);
  for (std::size_t i = 1; i < curve.size(); ++i) CHECK(curve[i].step > curve[i - 1].step);
}
