#pragma once
// The seed of a randomised test: CONVEYOR_TEST_SEED when set, else a fresh one. Printed
// either way (doctest's MESSAGE, in the test's output), so a failure's log says how to
// run exactly that case again.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace conveyor::testing {

inline std::uint32_t test_seed() {
  std::uint32_t seed = 0;
  if (const char* fixed = std::getenv("CONVEYOR_TEST_SEED"); fixed && *fixed)
    seed = static_cast<std::uint32_t>(std::stoul(fixed));
  else
    seed = std::random_device{}();
  MESSAGE("seed " << seed << " (CONVEYOR_TEST_SEED=" << seed << " repeats it)");
  return seed;
}

}  // namespace conveyor::testing
