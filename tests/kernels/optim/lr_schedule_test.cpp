#include "kernels/optim/lr_schedule.hpp"

#include <doctest/doctest.h>

namespace conveyor {
namespace {

TEST_CASE("the learning rate warms up linearly to lr") {
  const LrSchedule s{1e-3, 1e-4, 10, 110};
  CHECK(s.at(0) == doctest::Approx(1e-4));
  CHECK(s.at(4) == doctest::Approx(5e-4));
  CHECK(s.at(9) == doctest::Approx(1e-3));
}

TEST_CASE("after warm-up the learning rate follows a cosine from lr to lr_min, then stays") {
  const LrSchedule s{1e-3, 1e-4, 10, 110};
  CHECK(s.at(10) == doctest::Approx(1e-3));
  CHECK(s.at(60) == doctest::Approx(5.5e-4));  // half-way: the mean of lr and lr_min
  CHECK(s.at(110) == doctest::Approx(1e-4));
  CHECK(s.at(1000) == doctest::Approx(1e-4));
  for (std::int64_t step = 10; step < 110; ++step) CHECK(s.at(step + 1) <= s.at(step));
}

TEST_CASE("without warm-up the schedule starts at lr") {
  const LrSchedule s{2e-3, 0.0, 0, 4};
  CHECK(s.at(0) == doctest::Approx(2e-3));
  CHECK(s.at(2) == doctest::Approx(1e-3));
  CHECK(s.at(4) == 0.0);
}

}  // namespace
}  // namespace conveyor
