#include <doctest/doctest.h>

#include <map>
#include <tuple>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/dependencies.hpp"
#include "actors/plan/schedule/simulator.hpp"
#include "kernels/common/error.hpp"
#include "test_util.hpp"

using conveyor::InputError;
using namespace conveyor::sched;

namespace {

constexpr double kTight = 1e-9;

// F = I = W = 1, B = 2: the unit costs the zero-bubble paper (Qi et al., 2023) counts in.
const SimCosts kUnit = SimCosts::uniform(1.0, 2.0, 1.0, 1.0);

double bubble(const ScheduleSpec& spec, const SimCosts& costs = kUnit) {
  const SimResult r = simulate(make_schedule(spec), costs);
  REQUIRE(r.ok());
  return r.bubble;
}

}  // namespace

TEST_CASE("GPipe and 1F1B bubble is (p-1)/(m+p-1) for p in 2..8 and m in p..32") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 32; ++m) {
      for (const char* name : {"gpipe", "1f1b"}) {
        CAPTURE(name);
        CAPTURE(p);
        CAPTURE(m);
        const SimResult r = simulate(make_schedule({name, p, m, 1}), kUnit);
        REQUIRE(r.ok());
        CHECK(r.bubble == doctest::Approx(double(p - 1) / (m + p - 1)).epsilon(kTight));
        CHECK(r.makespan == doctest::Approx(3.0 * (m + p - 1)).epsilon(kTight));
        for (int k = 0; k < p; ++k) CHECK(r.idle[k] == doctest::Approx(3.0 * (p - 1)).epsilon(kTight));
      }
    }
  }
}

TEST_CASE("ZB-H1 bubble with F = I = W = 1 is (p-1)/(3m+p-1), at most half of 1F1B's") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 32; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      const double zb = bubble({"zb-h1", p, m, 1});
      CHECK(zb == doctest::Approx(double(p - 1) / (3 * m + p - 1)).epsilon(kTight));
      CHECK(zb <= 0.5 * bubble({"1f1b", p, m, 1}) + kTight);
    }
  }
}

TEST_CASE("ZB-H1 idles (p-1)(F + I - W) per rank when W <= I") {
  const double costs[][3] = {{1.0, 1.5, 0.5}, {2.0, 1.0, 1.0}, {1.2, 1.1, 0.9}, {1.0, 1.0, 0.5}};
  for (const auto& c : costs) {
    for (int p = 2; p <= 8; ++p) {
      for (int m = p; m <= 24; ++m) {
        CAPTURE(p);
        CAPTURE(m);
        CAPTURE(c[2]);
        const SimResult r = simulate(make_schedule({"zb-h1", p, m, 1}), SimCosts::uniform(c[0], 0.0, c[1], c[2]));
        for (int k = 0; k < p; ++k) {
          CHECK(r.idle[k] == doctest::Approx((p - 1) * (c[0] + c[1] - c[2])).epsilon(kTight));
        }
      }
    }
  }
}

TEST_CASE("ZB-V bubble with F = I = W = 1 is (p-1)/(6m+p-1) for m >= 2p, at most a third of 1F1B's") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = 2 * p; m <= 32; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      const SimResult r = simulate(make_schedule({"zbv", p, m, 1}), kUnit);
      REQUIRE(r.ok());
      CHECK(r.bubble == doctest::Approx(double(p - 1) / (6 * m + p - 1)).epsilon(kTight));
      for (int k = 0; k < p; ++k) CHECK(r.idle[k] == doctest::Approx(p - 1.0).epsilon(kTight));
      CHECK(r.bubble <= bubble({"1f1b", p, m, 1}) / 3.0 + kTight);
    }
  }
}

TEST_CASE("Interleaved 1F1B bubble in chunk units is (p-1)/(vm+p-1)") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 32; m += p) {
      for (int v = 2; v <= 4; ++v) {
        CAPTURE(p);
        CAPTURE(m);
        CAPTURE(v);
        const SimResult r = simulate(make_schedule({"interleaved-1f1b", p, m, v}), kUnit);
        REQUIRE(r.ok());
        CHECK(r.bubble == doctest::Approx(double(p - 1) / (v * m + p - 1)).epsilon(kTight));
        if (v == 2) {  // (p-1)(F+B)/v idle per rank: 3(p-1) in these units
          for (int k = 0; k < p; ++k) CHECK(r.idle[k] == doctest::Approx(3.0 * (p - 1)).epsilon(kTight));
        }
      }
    }
  }
}

TEST_CASE("Simulated timings keep each rank's order and respect every data dependency") {
  SimCosts costs = SimCosts::uniform(1.0, 2.0, 1.0, 0.5);
  costs.latency_us = 0.25;
  for (const ScheduleSpec& spec : test::all_specs(5, 10)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    const SimResult r = simulate(s, costs);
    REQUIRE(r.ok());
    const bool split = splits_backward(s);
    // end time of each compute action
    std::map<std::tuple<int, int, int, int>, double> end;
    for (const auto& list : r.timings) {
      for (const TimedAction& t : list) {
        end[{t.action.stage, static_cast<int>(t.action.kind), t.action.micro_batch, t.action.chunk}] = t.end_us;
      }
    }
    const auto end_of = [&](const Action& a) {
      return end.at({a.stage, static_cast<int>(a.kind), a.micro_batch, a.chunk});
    };
    for (std::size_t rank = 0; rank < r.timings.size(); ++rank) {
      REQUIRE(r.timings[rank].size() == s.ranks[rank].size());
      double free_at = 0.0;
      for (const TimedAction& t : r.timings[rank]) {
        CHECK(t.start_us >= free_at - kTight);
        free_at = t.end_us;
        if (const auto from = detail::producer_of(s, t.action, split)) {
          const double delay = from->stage == t.action.stage ? 0.0 : costs.latency_us;
          CHECK(t.start_us >= end_of(*from) + delay - kTight);
        }
        if (is_input_backward(t.action.kind)) {
          CHECK(t.start_us >= end_of({t.action.stage, ActionKind::F, t.action.micro_batch, t.action.chunk}) - kTight);
        }
        if (t.action.kind == ActionKind::W) {
          CHECK(t.start_us >= end_of({t.action.stage, ActionKind::I, t.action.micro_batch, t.action.chunk}) - kTight);
        }
      }
    }
  }
}

TEST_CASE("Message latency and bandwidth delay only cross-rank inputs") {
  SimCosts costs = SimCosts::uniform(1.0, 2.0, 1.0, 1.0);
  costs.latency_us = 0.5;
  CHECK(costs.message_us() == 0.5);
  // p=2, m=1: F0 on rank 0, message, F0 and B0 on rank 1, message, B0 on rank 0.
  CHECK(simulate(make_schedule({"1f1b", 2, 1, 1}), costs).makespan == doctest::Approx(7.0));
  costs.message_bytes = 2e6;
  costs.bandwidth_gb_s = 4.0;  // 2e6 bytes at 4e3 bytes/µs: 500 µs
  CHECK(costs.message_us() == doctest::Approx(500.5));
  // zbv p=1: both chunks on one rank, no message at all.
  CHECK(simulate(make_schedule({"zbv", 1, 2, 1}), costs).makespan == doctest::Approx(12.0));
}

TEST_CASE("A schedule with communication actions times like its compute-only form") {
  SimCosts costs = SimCosts::uniform(1.0, 2.0, 1.5, 0.5);
  costs.latency_us = 0.3;
  for (const ScheduleSpec& spec : test::all_specs(4, 8)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    const SimResult plain = simulate(s, costs);
    const SimResult comm = simulate(add_communication(s), costs);
    REQUIRE(comm.ok());
    CHECK(comm.makespan == doctest::Approx(plain.makespan).epsilon(kTight));
    CHECK(comm.bubble == doctest::Approx(plain.bubble).epsilon(kTight));
    CHECK(comm.busy == plain.busy);
  }
}

TEST_CASE("Per-rank costs: a slow rank sets the pace") {
  SimCosts costs;
  costs.f_us = {1.0, 2.0};
  costs.b_us = {2.0, 4.0};
  const SimResult r = simulate(make_schedule({"gpipe", 2, 4, 1}), costs);
  CHECK(r.makespan == doctest::Approx(27.0));
  CHECK(r.busy == std::vector<double>{12.0, 24.0});
  CHECK(r.idle == std::vector<double>{15.0, 3.0});
  CHECK(r.stage_bubble[1] == doctest::Approx(3.0 / 27.0));
  CHECK(r.bubble == doctest::Approx(18.0 / 54.0));
  CHECK(r.timings[1][4].action == Action{1, ActionKind::B, 0, 0});
  CHECK(r.timings[1][4].start_us == doctest::Approx(9.0));
  CHECK(r.timings[0][4].start_us == doctest::Approx(13.0));
}

TEST_CASE("The simulator reports peak activations per rank") {
  const SimResult r = simulate(make_schedule({"1f1b", 4, 8, 1}));
  CHECK(r.peak_activations == std::vector<int>{4, 3, 2, 1});
}

TEST_CASE("A deadlock is reported as data naming each blocked rank and what it waits for") {
  const Schedule s = test::custom(2, {"F0 B0 F1 B1", "F1 B1 F0 B0"});
  const SimResult r = simulate(s);
  REQUIRE_FALSE(r.ok());
  CHECK(*r.deadlock == "deadlock: rank 0 waits for B mb 0 from rank 1; rank 1 waits for F mb 1 from rank 0");
  REQUIRE(r.waits.size() == 2);
  CHECK(r.waits[0].slot == 1);
  CHECK(r.waits[1].slot == 0);
  CHECK(r.timings[0].size() == 1);  // only 0F0 ran
  CHECK(r.timings[1].empty());
}

TEST_CASE("A wait on a missing or later action of the same rank is named as such") {
  const SimResult later = simulate(test::custom(1, {"W0 I0 F0"}));
  CHECK(*later.deadlock == "deadlock: rank 0 waits for its own I mb 0, which comes later in its list");
  const SimResult missing = simulate(test::custom(1, {"F0", "B0"}));
  CHECK(*missing.deadlock == "deadlock: rank 1 waits for its own F mb 0, which is not in its list");
  const SimResult never = simulate(test::custom(1, {"F0 B0", "F0"}));
  CHECK(*never.deadlock == "deadlock: rank 0 waits for B mb 0 from rank 1, which rank 1 never runs");
}

TEST_CASE("The simulator rejects costs of the wrong size and actions outside the spec") {
  SimCosts costs;
  costs.f_us = {1.0, 1.0, 1.0};
  CHECK_THROWS_WITH_AS(simulate(make_schedule({"1f1b", 2, 2, 1}), costs),
                       doctest::Contains("costs.f_us has 3 values"), InputError);
  costs = SimCosts{};
  costs.message_bytes = 10;
  CHECK_THROWS_AS(simulate(make_schedule({"1f1b", 2, 2, 1}), costs), InputError);
  CHECK_THROWS_AS(simulate(test::custom(1, {"F0 B3"})), InputError);
}
