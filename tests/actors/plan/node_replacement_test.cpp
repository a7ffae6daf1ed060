// The one rule for whether a lost node is replaced: each condition it names refuses on
// its own, and a job with all of them takes replacements.
#include "actors/plan/node_replacement.hpp"

#include <doctest/doctest.h>

using namespace conveyor;

namespace {

ReplacementFacts replaceable() {
  ReplacementFacts f;
  f.nodes = 2;
  f.policy = FaultPolicy::restart;
  f.snapshots = true;
  f.copies = true;
  f.all_cpu = true;
  f.checkpoint_every = 0;
  f.rejoin_timeout_s = 60;
  return f;
}

}  // namespace

TEST_CASE("a lost node is replaced with snapshots, node 0's copies, fault.policy restart and a rejoin timeout") {
  CHECK(no_replacement_reason(replaceable()).empty());
}

TEST_CASE("each missing condition refuses replacements, naming its key") {
  auto f = replaceable();
  f.nodes = 1;
  CHECK(no_replacement_reason(f) == "it runs in one process");
  f = replaceable();
  f.policy = FaultPolicy::abort;
  CHECK(no_replacement_reason(f) == "fault.policy is abort");
  f = replaceable();
  f.snapshots = false;
  CHECK(no_replacement_reason(f).find("fault.snapshot_every is 0") != std::string::npos);
  f = replaceable();
  f.rejoin_timeout_s = 0;
  CHECK(no_replacement_reason(f) == "fault.rejoin_timeout_s is 0");
}

TEST_CASE("without buddy copies host-memory stages go back to the newest checkpoint, GPU stages cannot") {
  auto f = replaceable();
  f.copies = false;
  CHECK(no_replacement_reason(f).find("checkpoint.every is 0") != std::string::npos);
  f.checkpoint_every = 10;
  CHECK(no_replacement_reason(f).empty());
  f.all_cpu = false;
  CHECK(no_replacement_reason(f).find("GPU stages") != std::string::npos);
}

TEST_CASE("fault.buddy_copies auto means on exactly when every stage computes in host memory") {
  CHECK(buddy_copies_on(BuddyCopies::automatic, true));
  CHECK_FALSE(buddy_copies_on(BuddyCopies::automatic, false));
  CHECK(buddy_copies_on(BuddyCopies::on, false));
  CHECK_FALSE(buddy_copies_on(BuddyCopies::off, true));
}
