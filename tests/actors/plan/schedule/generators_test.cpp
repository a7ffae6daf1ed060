#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/validator.hpp"
#include "kernels/common/error.hpp"
#include "test_util.hpp"

using conveyor::InputError;
using namespace conveyor::sched;

TEST_CASE("schedule_names lists the five generators") {
  CHECK(schedule_names() ==
        std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv"});
}

TEST_CASE("Every generator runs each rank's weight gradients in micro-batch order per chunk") {
  for (const ScheduleSpec& spec : test::all_specs()) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    const bool split = spec.name == "zb-h1" || spec.name == "zbv";
    const ActionKind weight = split ? ActionKind::W : ActionKind::B;
    for (const auto& list : s.ranks) {
      std::map<int, std::vector<int>> order;  // chunk → micro-batches of its W (or B)
      for (const Action& a : list) {
        if (a.kind == weight) order[a.chunk].push_back(a.micro_batch);
      }
      REQUIRE(static_cast<int>(order.size()) == s.chunks_per_rank());
      for (const auto& [chunk, mbs] : order) {
        CAPTURE(chunk);
        CHECK(static_cast<int>(mbs.size()) == spec.micro_batches);
        CHECK(std::is_sorted(mbs.begin(), mbs.end()));
      }
    }
    ValidationOptions ordered;
    ordered.require_ordered_weight_grads = true;
    CHECK_NOTHROW(validate(s, ordered));
  }
}

TEST_CASE("The validator accepts every generator for a range of p, m and v, with communication") {
  int checked = 0;
  for (const ScheduleSpec& spec : test::all_specs()) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);  // validates
    CHECK_NOTHROW(validate(add_communication(s)));
    ++checked;
  }
  CHECK(checked > 800);
}

TEST_CASE("gpipe, 1f1b and interleaved use B, while zb-h1 and zbv use I and W") {
  for (const ScheduleSpec& spec : test::all_specs(4, 8)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    const bool split = spec.name == "zb-h1" || spec.name == "zbv";
    for (const auto& list : s.ranks) {
      for (const Action& a : list) {
        CHECK(is_compute(a.kind));
        if (split) CHECK(a.kind != ActionKind::B);
        if (!split) CHECK((a.kind == ActionKind::F || a.kind == ActionKind::B));
      }
    }
  }
}

TEST_CASE("Each rank runs 2m (B) or 3m (I and W) compute actions per chunk") {
  for (const ScheduleSpec& spec : test::all_specs(6, 12)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    const bool split = spec.name == "zb-h1" || spec.name == "zbv";
    for (const auto& list : s.ranks) {
      CHECK(list.size() ==
            static_cast<std::size_t>((split ? 3 : 2) * spec.micro_batches * s.chunks_per_rank()));
    }
  }
}

TEST_CASE("Interleaved placement is looped and ZB-V placement is a V") {
  const Schedule looped = make_schedule({"interleaved-1f1b", 4, 4, 3});
  CHECK(looped.chunks_per_rank() == 3);
  CHECK(looped.model_stages() == 12);
  CHECK(looped.model_stage(1, 2) == 9);
  CHECK(looped.holder(9) == RankChunk{1, 2});
  const Schedule v = make_schedule({"zbv", 4, 8, 1});
  CHECK(v.chunks_per_rank() == 2);
  CHECK(v.model_stage(0, 0) == 0);
  CHECK(v.model_stage(0, 1) == 7);
  CHECK(v.model_stage(3, 1) == 4);
  CHECK(v.holder(5) == RankChunk{2, 1});
  for (const Schedule* s : {&looped, &v}) {
    for (int st = 0; st < s->model_stages(); ++st) {
      const RankChunk h = s->holder(st);
      CHECK(s->model_stage(h.rank, h.chunk) == st);
    }
  }
  CHECK(make_schedule({"1f1b", 4, 8, 1}).chunks_per_rank() == 1);
}

TEST_CASE("ZB-V builds for max(2p-1, m) micro-batches and keeps only the first m") {
  for (int p = 2; p <= 6; ++p) {
    for (int m = 1; m < 2 * p - 1; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      const Schedule s = make_schedule({"zbv", p, m, 1});
      for (const auto& list : s.ranks) {
        CHECK(list.size() == static_cast<std::size_t>(6 * m));
        for (const Action& a : list) CHECK(a.micro_batch < m);
      }
    }
  }
}

TEST_CASE("make_schedule rejects a bad spec with an InputError naming the field") {
  CHECK_THROWS_WITH_AS(make_schedule({"pipedream", 2, 4, 1}), doctest::Contains("unknown name"),
                       InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"1f1b", 0, 4, 1}), doctest::Contains("stages = 0"),
                       InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"gpipe", 2, 0, 1}), doctest::Contains("micro_batches = 0"),
                       InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"interleaved-1f1b", 2, 4, 1}),
                       doctest::Contains("virtual_stages = 1"), InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"interleaved-1f1b", 4, 6, 2}),
                       doctest::Contains("micro_batches = 6 must be a multiple of pipeline.stages = 4"),
                       InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"1f1b", 2, 4, 2}), doctest::Contains("virtual_stages = 2"),
                       InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"zbv", 2, 4, 3}), doctest::Contains("virtual_stages = 3"),
                       InputError);
  CHECK_NOTHROW(make_schedule({"zbv", 2, 4, 2}));
  // Every (rank, chunk, micro-batch) cell is held, checked and simulated: 2^22 at most.
  CHECK_THROWS_WITH_AS(make_schedule({"1f1b", 65536, 65536, 1}),
                       doctest::Contains("= 4294967296 is more than 4194304"), InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"zbv", 64, 32769, 1}), doctest::Contains("= 4194432 is more"),
                       InputError);
  CHECK_THROWS_WITH_AS(make_schedule({"interleaved-1f1b", 2, 4, 1 << 20}),
                       doctest::Contains("chunks per rank = 8388608"), InputError);
}

TEST_CASE("A single-rank pipeline is valid for every schedule") {
  for (const char* name : {"gpipe", "1f1b", "zb-h1", "zbv"}) {
    CAPTURE(name);
    CHECK_NOTHROW(make_schedule({name, 1, 3, 1}));
  }
  CHECK_NOTHROW(make_schedule({"interleaved-1f1b", 1, 3, 2}));
}
