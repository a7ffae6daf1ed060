// Gradient shares (actors/worker/gradient_shares.hpp): which configured replica's share a
// micro-batch belongs to, and where each chunk's shares end in a step's action list.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "actors/plan/pipeline_layout.hpp"
#include "actors/worker/gradient_shares.hpp"

using namespace conveyor;

namespace {

std::vector<sched::Action> parse_all(const std::vector<std::string>& texts) {
  std::vector<sched::Action> out;
  for (const auto& t : texts) out.push_back(sched::Action::parse(t));
  return out;
}

}  // namespace

TEST_CASE("8 micro-batches in 2 shares: 0 to 3 are the first configured replica's, 4 to 7 the second's") {
  for (int mb = 0; mb < 4; ++mb) CHECK(share_of(mb, 8, 2) == 0);
  for (int mb = 4; mb < 8; ++mb) CHECK(share_of(mb, 8, 2) == 1);
  CHECK(share_of(5, 8, 4) == 2);
  CHECK(share_of(7, 8, 1) == 0);
}

TEST_CASE("shares that do not divide the micro-batches, and a micro-batch out of range, are refused") {
  CHECK_THROWS_AS(share_of(0, 6, 4), std::invalid_argument);
  CHECK_THROWS_AS(share_of(0, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(share_of(8, 8, 2), std::invalid_argument);
  CHECK_THROWS_AS(share_of(-1, 8, 2), std::invalid_argument);
}

TEST_CASE("1F1B on 2 stages, 4 micro-batches in 2 shares: each rank's shares end at its B1 and B3") {
  const auto layout = make_pipeline_layout(sched::ScheduleSpec{"1f1b", 2, 4, 1}, 4);
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto& actions = layout.schedule.ranks[rank];
    const auto ends = share_ends(actions, 1, 4, 2);
    REQUIRE(ends.size() == 1);
    REQUIRE(ends[0].ends.size() == 2);
    CHECK(actions[ends[0].ends[0]].kind == sched::ActionKind::B);
    CHECK(actions[ends[0].ends[0]].micro_batch == 1);
    CHECK(actions[ends[0].ends[1]].micro_batch == 3);
    CHECK(ends[0].ends[1] > ends[0].ends[0]);
  }
}

TEST_CASE("ZB-H1's shares end at W actions, the input gradients ignored") {
  const auto layout = make_pipeline_layout(sched::ScheduleSpec{"zb-h1", 2, 4, 1}, 4);
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto& actions = layout.schedule.ranks[rank];
    const auto ends = share_ends(actions, 1, 4, 2);
    for (int s = 0; s < 2; ++s) {
      const auto& a = actions[ends[0].ends[static_cast<std::size_t>(s)]];
      CHECK((a.kind == sched::ActionKind::W || a.kind == sched::ActionKind::B));
      CHECK(a.micro_batch == 2 * s + 1);
    }
  }
}

TEST_CASE("interleaved 1F1B ends each chunk's shares apart") {
  const auto layout = make_pipeline_layout(sched::ScheduleSpec{"interleaved-1f1b", 2, 4, 2}, 4);
  const auto& actions = layout.schedule.ranks[0];
  const auto ends = share_ends(actions, 2, 4, 2);
  REQUIRE(ends.size() == 2);
  for (int c = 0; c < 2; ++c) {
    CAPTURE(c);
    CHECK(actions[ends[c].ends[0]].chunk == c);
    CHECK(actions[ends[c].ends[0]].micro_batch == 1);
    CHECK(actions[ends[c].ends[1]].micro_batch == 3);
  }
}

TEST_CASE("a chunk whose weight gradients run out of micro-batch order is refused naming the action") {
  const auto actions = parse_all({"0F0", "0F1", "0F2", "0F3", "0B0", "0B2", "0B1", "0B3"});
  try {
    share_ends(actions, 1, 4, 2);
    FAIL("not refused");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("0B1 (slot 6)") != std::string::npos);
  }
}

TEST_CASE("a share without a weight-gradient action is refused: it would have nothing to combine") {
  const auto actions = parse_all({"0F0", "0F1", "0I2", "0B0", "0B1"});
  CHECK_THROWS_AS(share_ends(actions, 1, 4, 2), std::invalid_argument);
  CHECK_THROWS_AS(share_ends(parse_all({"0B0c1"}), 1, 2, 2), std::invalid_argument);
}

TEST_CASE("every generated schedule runs each chunk's weight gradients in micro-batch order, so its shares end cleanly") {
  struct Case {
    std::string name;
    int virtual_stages;
  };
  for (const Case& c : {Case{"gpipe", 1}, Case{"1f1b", 1}, Case{"interleaved-1f1b", 2}, Case{"zb-h1", 1},
                        Case{"zbv", 2}}) {
    for (int stages : {2, 4}) {
      CAPTURE(c.name);
      CAPTURE(stages);
      const auto layout = make_pipeline_layout(sched::ScheduleSpec{c.name, stages, 8, c.virtual_stages}, 8);
      const int chunks = layout.schedule.chunks_per_rank();
      for (const auto& actions : layout.schedule.ranks) {
        CHECK_NOTHROW(share_ends(actions, chunks, 8, 2));
        CHECK_NOTHROW(share_ends(actions, chunks, 8, 4));
      }
    }
  }
}
