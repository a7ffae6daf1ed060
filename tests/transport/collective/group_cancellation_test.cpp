// GroupCancellation: the coordinator cancels the generations below the one the stage
// groups are rebuilt with; a group of a later generation is never touched.
#include "transport/collective/group_cancellation.hpp"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

namespace conveyor {
namespace {

TEST_CASE("group cancellation covers the generations below the threshold, and only grows") {
  GroupCancellation c;
  CHECK_FALSE(c.cancelled(0));
  c.cancel_below(1);  // the first recovery: generation 0 is abandoned, 1 forms
  CHECK(c.cancelled(0));
  CHECK_FALSE(c.cancelled(1));
  c.cancel_below(3);
  CHECK(c.cancelled(2));
  CHECK_FALSE(c.cancelled(3));
  c.cancel_below(2);  // a late, older request changes nothing
  CHECK(c.cancelled(2));
  CHECK_FALSE(c.cancelled(3));
}

TEST_CASE("group cancellation from many threads ends at the largest threshold") {
  GroupCancellation c;
  std::vector<std::thread> threads;
  for (std::uint32_t t = 1; t <= 8; ++t)
    threads.emplace_back([&c, t] {
      for (std::uint32_t g = 0; g < 1000; ++g) c.cancel_below(t * 1000 + g);
    });
  for (auto& t : threads) t.join();
  CHECK(c.cancelled(8998));
  CHECK_FALSE(c.cancelled(8999));
}

}  // namespace
}  // namespace conveyor
