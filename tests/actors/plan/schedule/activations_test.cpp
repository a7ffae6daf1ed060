#include <doctest/doctest.h>

#include <algorithm>

#include "actors/plan/schedule/activations.hpp"
#include "test_util.hpp"

using namespace conveyor::sched;

TEST_CASE("1F1B keeps at most p - r micro-batches in flight on rank r") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      const auto peaks = peak_activations(make_schedule({"1f1b", p, m, 1}));
      for (int r = 0; r < p; ++r) {
        CAPTURE(p);
        CAPTURE(m);
        CAPTURE(r);
        CHECK(peaks[r] <= p - r);
        CHECK(peaks[r] == std::min(p - r, m));
      }
    }
  }
}

TEST_CASE("GPipe keeps every micro-batch in flight") {
  const auto peaks = peak_activations(make_schedule({"gpipe", 4, 12, 1}));
  CHECK(peaks == std::vector<int>(4, 12));
}

TEST_CASE("ZB-H1 holds a micro-batch until its W, so no rank exceeds 1F1B's worst rank") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 24; ++m) {
      const auto peaks = peak_activations(make_schedule({"zb-h1", p, m, 1}));
      CHECK(*std::max_element(peaks.begin(), peaks.end()) == p);
    }
  }
}

TEST_CASE("Activations are counted per chunk") {
  const auto counts = in_flight_counts(test::custom(2, {"F0c0 F0c1 F1c0 B0c1 B0c0 F1c1 B1c1 B1c0"}, 2));
  CHECK(counts[0] == std::vector<int>{1, 2, 3, 2, 1, 2, 1, 0});
}
