#include <doctest/doctest.h>

#include <string>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/validator.hpp"
#include "kernels/common/error.hpp"
#include "test_util.hpp"

using conveyor::InputError;
using namespace conveyor::sched;

namespace {

// The message validate() throws; fails the test when it does not throw.
std::string rejection(const Schedule& s, const ValidationOptions& options = {}) {
  try {
    validate(s, options);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("validate accepted the schedule");
  return {};
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

TEST_CASE("The validator rejects a micro-batch without its B and marks its F in the grid") {
  Schedule s = make_schedule({"1f1b", 2, 4, 1});
  s.ranks[1].erase(s.ranks[1].begin() + 5);  // 1B2
  const std::string msg = rejection(s);
  CHECK(first_line(msg) == "schedule 1f1b: rank 1 micro-batch 2 has F but no B (nor I and W)");
  CHECK(msg.find("[*1F2*]") != std::string::npos);
  // The grid follows the summary: a header of slot indices, then one row per rank.
  CHECK(msg.find("\n         0      1") != std::string::npos);
  CHECK(msg.find("\nrank 0   0F0    0F1    0B0") != std::string::npos);
  CHECK(msg.find("\nrank 1   1F0    1B0    1F1    1B1  [*1F2*]  1F3") != std::string::npos);
}

TEST_CASE("The validator rejects a W that runs before its I") {
  Schedule s = make_schedule({"zb-h1", 2, 2, 1});
  // rank 0: F0 F1 I0 W0 I1 W1 → F0 F1 W0 I0 I1 W1
  REQUIRE(s.ranks[0] == test::rank_list(0, "F0 F1 I0 W0 I1 W1"));
  std::swap(s.ranks[0][2], s.ranks[0][3]);
  const std::string msg = rejection(s);
  CHECK(first_line(msg) == "schedule zb-h1: rank 0 micro-batch 0: 0W0 runs before its I");
  CHECK(msg.find("[*0W0*]") != std::string::npos);
  CHECK(msg.find("[*0I0*]") != std::string::npos);
}

TEST_CASE("The validator rejects a B before its F, a W without I and a duplicate action") {
  CHECK(first_line(rejection(test::custom(1, {"B0 F0"}))) ==
        "schedule custom: rank 0 micro-batch 0: 0B0 runs before its F");
  CHECK(first_line(rejection(test::custom(1, {"F0 W0"}))) ==
        "schedule custom: rank 0 micro-batch 0 has W but no I");
  CHECK(first_line(rejection(test::custom(1, {"F0 B0 B0"}))) ==
        "schedule custom: rank 0 runs 0B0 twice (slots 1 and 2)");
  CHECK(first_line(rejection(test::custom(2, {"F0 B0"}))) ==
        "schedule custom: rank 0 micro-batch 1 has no F and no backward");
  CHECK(first_line(rejection(test::custom(1, {"F0 B0 I0 W0"}))) ==
        "schedule custom: rank 0 micro-batch 0 has both B and I/W");
}

TEST_CASE("The validator rejects actions outside the spec") {
  CHECK(first_line(rejection(test::custom(1, {"F0 B0 F1 B1"}))).find("micro-batch 1 is out of range") !=
        std::string::npos);
  Schedule s = make_schedule({"1f1b", 2, 1, 1});
  s.ranks[1][0].chunk = 1;
  CHECK(first_line(rejection(s)).find("chunk 1 is out of range") != std::string::npos);
  s = make_schedule({"1f1b", 2, 1, 1});
  s.ranks[1][0].stage = 0;
  CHECK(first_line(rejection(s)) == "schedule 1f1b: rank 1 slot 0 holds 0F0, an action of rank 0");
  s = make_schedule({"1f1b", 2, 1, 1});
  s.ranks.pop_back();
  CHECK(first_line(rejection(s)) == "schedule 1f1b: has 1 rank lists for stages = 2");
}

TEST_CASE("Two ranks with swapped receive order deadlock and the report names the waiting ranks") {
  // Rank 1 takes micro-batch 1 before 0; rank 0 waits for 0's gradient before sending 1.
  const Schedule compute = test::custom(2, {"F0 B0 F1 B1", "F1 B1 F0 B0"});
  const std::string msg = rejection(compute);
  CHECK(first_line(msg) ==
        "schedule custom: deadlock: rank 0 waits for B mb 0 from rank 1; rank 1 waits for F mb 1 "
        "from rank 0");
  CHECK(msg.find("[*0B0*]") != std::string::npos);
  CHECK(msg.find("[*1F1*]") != std::string::npos);

  const Schedule comm = test::custom(
      2, {"F0 SEND_F0 RECV_B0 B0 F1 SEND_F1 RECV_B1 B1",
          "RECV_F1 F1 B1 SEND_B1 RECV_F0 F0 B0 SEND_B0"});
  const std::string msg2 = rejection(comm);
  CHECK(first_line(msg2) ==
        "schedule custom: deadlock: rank 0 waits for B mb 0 from rank 1; rank 1 waits for F mb 1 "
        "from rank 0");
  CHECK(msg2.find("[*0RECV_B0*]") != std::string::npos);
  CHECK(msg2.find("[*1RECV_F1*]") != std::string::npos);
}

TEST_CASE("The validator rejects receives taken in another order than sent on one edge") {
  // No deadlock (sends do not block), but an in-order channel would hand rank 0 the wrong
  // gradient.
  const Schedule s = test::custom(
      2, {"F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1",
          "RECV_F0 F0 RECV_F1 F1 B1 SEND_B1 B0 SEND_B0"});
  const std::string msg = rejection(s);
  CHECK(first_line(msg) ==
        "schedule custom: on the edge from model stage 1 to 0, rank 0 takes 0RECV_B0 as message 0 "
        "where rank 1 sends 1SEND_B1: each edge must be received in the order it is sent");
  CHECK(msg.find("[*0RECV_B0*]") != std::string::npos);
  CHECK(msg.find("[*1SEND_B1*]") != std::string::npos);
}

TEST_CASE("The validator checks that communication actions sit around their compute actions") {
  CHECK(first_line(rejection(test::custom(1, {"F0 SEND_F0 RECV_B0 B0", "F0 B0 SEND_B0"}))) ==
        "schedule custom: 1F0 needs 1RECV_F0 before it");
  CHECK(first_line(rejection(test::custom(1, {"F0 RECV_B0 B0", "RECV_F0 F0 B0 SEND_B0"}))) ==
        "schedule custom: 0F0 needs 0SEND_F0 after it");
  CHECK(first_line(rejection(test::custom(1, {"F0 SEND_F0 RECV_B0 B0", "F0 RECV_F0 B0 SEND_B0"}))) ==
        "schedule custom: 1RECV_F0 comes after its consumer 1F0");
  CHECK(first_line(rejection(test::custom(1, {"RECV_F0 F0 B0"}))) ==
        "schedule custom: 0RECV_F0 has no peer: nothing is sent that way at the pipeline's end");
}

TEST_CASE("The validator enforces an optional activation bound") {
  const Schedule gpipe = make_schedule({"gpipe", 2, 4, 1});
  const std::string msg = rejection(gpipe, {.max_activations = 2});
  CHECK(first_line(msg) ==
        "schedule gpipe: rank 0 holds 3 micro-batches in flight after 0F2, more than "
        "max_activations = 2");
  CHECK(msg.find("[*0F2*]") != std::string::npos);
  CHECK_NOTHROW(validate(make_schedule({"1f1b", 2, 4, 1}), {.max_activations = 2}));
}

TEST_CASE("The validator can require weight gradients in micro-batch order") {
  const Schedule s = test::custom(2, {"F0 F1 B1 B0"});
  CHECK_NOTHROW(validate(s));
  ValidationOptions ordered;
  ordered.require_ordered_weight_grads = true;
  CHECK(first_line(rejection(s, ordered)) ==
        "schedule custom: rank 0 runs 0B0 after 0B1: weight gradients must accumulate in "
        "micro-batch order");
}
