#include <doctest/doctest.h>

#include <algorithm>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "actors/plan/schedule/validator.hpp"
#include "kernels/common/error.hpp"
#include "test_util.hpp"

using conveyor::InputError;
using namespace conveyor::sched;

TEST_CASE("The communication pass sends right after the producer and receives right before the consumer") {
  const Schedule s = add_communication(make_schedule({"1f1b", 2, 4, 1}));
  CHECK(s.ranks[0] == test::rank_list(0, "F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 F2 SEND_F2 RECV_B1 B1 "
                                         "F3 SEND_F3 RECV_B2 B2 RECV_B3 B3"));
  CHECK(s.ranks[1] == test::rank_list(1, "RECV_F0 F0 B0 SEND_B0 RECV_F1 F1 B1 SEND_B1 RECV_F2 F2 "
                                         "B2 SEND_B2 RECV_F3 F3 B3 SEND_B3"));
}

TEST_CASE("The communication pass sends gradients from I and never around W") {
  const Schedule s = add_communication(make_schedule({"zb-h1", 2, 2, 1}));
  CHECK(s.ranks[0] == test::rank_list(0, "F0 SEND_F0 F1 SEND_F1 RECV_B0 I0 W0 RECV_B1 I1 W1"));
  CHECK(s.ranks[1] == test::rank_list(1, "RECV_F0 F0 I0 SEND_B0 RECV_F1 F1 I1 SEND_B1 W0 W1"));
}

TEST_CASE("ZB-V's hand-off between the two chunks of the last rank needs no message") {
  const int p = 3;
  const Schedule s = add_communication(make_schedule({"zbv", p, 6, 1}));
  for (const Action& a : s.ranks[p - 1]) {
    CHECK_FALSE((a.kind == ActionKind::SEND_F && a.chunk == 0));
    CHECK_FALSE((a.kind == ActionKind::RECV_F && a.chunk == 1));
    CHECK_FALSE((a.kind == ActionKind::SEND_B && a.chunk == 1));
    CHECK_FALSE((a.kind == ActionKind::RECV_B && a.chunk == 0));
  }
  // rank 0 holds the first and the last model stage: it receives activations only for chunk 1
  for (const Action& a : s.ranks[0]) {
    if (a.kind == ActionKind::RECV_F) CHECK(a.chunk == 1);
    if (a.kind == ActionKind::SEND_B) CHECK(a.chunk == 1);
  }
}

TEST_CASE("Every send has its receive on the peer rank, and stripping undoes the pass") {
  for (const ScheduleSpec& spec : test::all_specs(5, 10)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    const Schedule c = add_communication(s);
    CHECK(has_communication(c) == (spec.stages > 1));
    CHECK(strip_communication(c).ranks == s.ranks);
    int sends = 0;
    int recvs = 0;
    for (const auto& list : c.ranks) {
      for (const Action& a : list) {
        if (is_send(a.kind)) ++sends;
        if (is_recv(a.kind)) ++recvs;
        if (is_compute(a.kind)) continue;
        const auto peer = peer_of(c, a);
        REQUIRE(peer.has_value());
        CHECK(peer->stage != a.stage);
        const auto& peer_list = c.ranks[peer->stage];
        CHECK(std::find(peer_list.begin(), peer_list.end(), *peer) != peer_list.end());
        CHECK(peer_of(c, *peer) == a);
      }
    }
    CHECK(sends == recvs);
  }
}

TEST_CASE("The communication pass refuses a schedule that already communicates") {
  const Schedule c = add_communication(make_schedule({"1f1b", 2, 2, 1}));
  CHECK_THROWS_AS(add_communication(c), InputError);
  CHECK_FALSE(has_communication(make_schedule({"1f1b", 2, 2, 1})));
}
