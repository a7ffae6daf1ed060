// The one event model (simulation.hpp) and its two duration lookups: per rank (SimCosts,
// simulate) and per model stage (StageCosts, simulate_stages / StageSimulator).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "actors/plan/schedule/comm_pass.hpp"
#include "actors/plan/schedule/simulation.hpp"
#include "actors/plan/schedule/simulator.hpp"
#include "actors/plan/schedule/stage_costs.hpp"
#include "test_util.hpp"

using namespace conveyor::sched;

namespace {

void check_same(const SimResult& got, const SimResult& want) {
  CHECK(got.makespan == want.makespan);
  CHECK(got.busy == want.busy);
  CHECK(got.peak_activations == want.peak_activations);
  REQUIRE(got.timings.size() == want.timings.size());
  for (std::size_t r = 0; r < got.timings.size(); ++r) {
    REQUIRE(got.timings[r].size() == want.timings[r].size());
    for (std::size_t k = 0; k < got.timings[r].size(); ++k) {
      CHECK(got.timings[r][k].action == want.timings[r][k].action);
      CHECK(got.timings[r][k].start_us == want.timings[r][k].start_us);
      CHECK(got.timings[r][k].end_us == want.timings[r][k].end_us);
    }
  }
}

}  // namespace

TEST_CASE("One Simulation runs many duration lookups, each as a fresh simulate() would") {
  const Schedule s = make_schedule({"zb-h1", 4, 8, 1});
  const Simulation sim(s);
  SimCosts fast = SimCosts::uniform(1.0, 2.0, 1.0, 1.0), slow = SimCosts::uniform(2.0, 3.0, 1.5, 0.5);
  slow.latency_us = 0.75;
  for (const SimCosts& costs : {fast, slow, fast}) {
    check_same(sim.run([&](const Action& a) { return costs.duration_us(a); }, costs.message_us()),
               simulate(s, costs));
  }
}

TEST_CASE("Any callable is a duration lookup") {
  // gpipe p=2 m=1: F0 then B0 on each rank; rank 1's actions take 2 and 3, rank 0's 1 and 4.
  const Simulation sim(make_schedule({"gpipe", 2, 1, 1}));
  const std::map<std::string, double> took{{"0F0", 1.0}, {"0B0", 4.0}, {"1F0", 2.0}, {"1B0", 3.0}};
  const SimResult r = sim.run([&](const Action& a) { return took.at(a.str()); }, 0.5);
  REQUIRE(r.ok());
  CHECK(r.timings[1][0].start_us == 1.5);  // F0 on rank 0 ends at 1, the message takes 0.5
  CHECK(r.timings[0][1].start_us == 7.0);  // B0 on rank 1 ends at 1.5 + 2 + 3 = 6.5, + 0.5
  CHECK(r.makespan == 11.0);
  CHECK(r.busy == std::vector<double>{5.0, 5.0});
}

TEST_CASE("simulate_stages looks each action up by the model stage of its chunk, zbv's V included") {
  // F of model stage m costs 2^m, I and W nothing; 4 micro-batches.
  const StageCosts costs = StageCosts::from_fiw({1, 2, 4, 8}, {0, 0, 0, 0}, {0, 0, 0, 0});
  // zbv p=2: rank 0 holds model stages 0 and 3 (the V's ends), rank 1 stages 1 and 2.
  const SimResult v = simulate_stages(make_schedule({"zbv", 2, 4, 1}), costs);
  REQUIRE(v.ok());
  CHECK(v.busy == std::vector<double>{4 * (1 + 8.0), 4 * (2 + 4.0)});
  // interleaved p=2 v=2: rank 0 holds model stages 0 and 2, rank 1 stages 1 and 3.
  const SimResult looped = simulate_stages(make_schedule({"interleaved-1f1b", 2, 4, 2}), costs);
  REQUIRE(looped.ok());
  CHECK(looped.busy == std::vector<double>{4 * (1 + 4.0), 4 * (2 + 8.0)});
}

TEST_CASE("simulate_stages times the compute-only schedule, as simulate() times one with SEND/RECV") {
  for (const ScheduleSpec& spec : test::all_specs(3, 6)) {
    CAPTURE(test::describe(spec));
    const Schedule s = make_schedule(spec);
    std::vector<double> f, i, w;
    for (int m = 0; m < s.model_stages(); ++m) {
      f.push_back(1.0 + 0.25 * m);
      i.push_back(1.5 - 0.125 * m);
      w.push_back(0.5 + 0.1 * m);
    }
    const StageCosts costs = StageCosts::from_fiw(f, i, w, 0.3);
    const SimResult plain = simulate_stages(s, costs);
    check_same(simulate_stages(add_communication(s), costs), plain);
    const StageSimulator many(s);
    check_same(many.run(costs), plain);
  }
}

TEST_CASE("A deadlock under per-stage costs names what each rank waits for, as simulate() does") {
  const Schedule s = test::custom(2, {"F0 B0 F1 B1", "F1 B1 F0 B0"});
  const SimResult r = simulate_stages(s, StageCosts::from_fiw({1, 1}, {1, 1}, {0, 0}));
  REQUIRE_FALSE(r.ok());
  CHECK(*r.deadlock == *simulate(s).deadlock);
  CHECK(*r.deadlock == "deadlock: rank 0 waits for B mb 0 from rank 1; rank 1 waits for F mb 1 from rank 0");
  REQUIRE(r.waits.size() == 2);
  CHECK(r.waits[0].needs == Action{1, ActionKind::B, 0, 0});
}
