#include <doctest/doctest.h>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "test_util.hpp"

using namespace conveyor::sched;

TEST_CASE("producer_of names the action, and so the rank, that makes each input") {
  const Schedule s = make_schedule({"1f1b", 3, 4, 1});
  CHECK(producer_of(s, {1, ActionKind::F, 2, 0}) == Action{0, ActionKind::F, 2, 0});
  CHECK_FALSE(producer_of(s, {0, ActionKind::F, 2, 0}));       // reads the batch
  CHECK(producer_of(s, {1, ActionKind::B, 2, 0}) == Action{2, ActionKind::B, 2, 0});
  CHECK_FALSE(producer_of(s, {2, ActionKind::B, 2, 0}));       // starts from the loss

  const Schedule zb = make_schedule({"zb-h1", 3, 4, 1});
  CHECK(producer_of(zb, {0, ActionKind::I, 1, 0}) == Action{1, ActionKind::I, 1, 0});
  CHECK_FALSE(producer_of(zb, {0, ActionKind::W, 1, 0}));      // reads its own I's stash

  const Schedule looped = make_schedule({"interleaved-1f1b", 2, 4, 2});
  // model stage 2 (rank 0, chunk 1) reads model stage 1 (rank 1, chunk 0)
  CHECK(producer_of(looped, {0, ActionKind::F, 3, 1}) == Action{1, ActionKind::F, 3, 0});
  CHECK(producer_of(looped, {1, ActionKind::B, 3, 0}) == Action{0, ActionKind::B, 3, 1});

  const Schedule v = make_schedule({"zbv", 2, 4, 1});
  // the tip of the V: model stage 2 (rank 1, chunk 1) reads stage 1 on the same rank
  CHECK(producer_of(v, {1, ActionKind::F, 0, 1}) == Action{1, ActionKind::F, 0, 0});
  CHECK(producer_of(v, {1, ActionKind::I, 0, 0}) == Action{1, ActionKind::I, 0, 1});
  CHECK(producer_of(v, {0, ActionKind::F, 0, 1}) == Action{1, ActionKind::F, 0, 1});
}

TEST_CASE("consumer_of is the inverse of producer_of for every generator") {
  for (const ScheduleSpec& spec : test::all_specs(5, 8)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    for (const auto& list : s.ranks) {
      for (const Action& a : list) {
        if (const auto from = producer_of(s, a)) CHECK(consumer_of(s, *from) == a);
        if (const auto to = consumer_of(s, a)) CHECK(producer_of(s, *to) == a);
      }
    }
  }
}

TEST_CASE("compute_of and peer_of tie each message to its compute actions") {
  const Schedule s = add_communication(make_schedule({"zb-h1", 2, 2, 1}));
  CHECK(compute_of(s, {1, ActionKind::SEND_B, 1, 0}) == Action{1, ActionKind::I, 1, 0});
  CHECK(compute_of(s, {1, ActionKind::RECV_F, 1, 0}) == Action{1, ActionKind::F, 1, 0});
  CHECK_FALSE(compute_of(s, {1, ActionKind::F, 1, 0}));
  CHECK(peer_of(s, {0, ActionKind::SEND_F, 1, 0}) == Action{1, ActionKind::RECV_F, 1, 0});
  CHECK(peer_of(s, {0, ActionKind::RECV_B, 1, 0}) == Action{1, ActionKind::SEND_B, 1, 0});
  CHECK_FALSE(peer_of(s, {1, ActionKind::SEND_F, 1, 0}));  // the last stage sends no activation
}
