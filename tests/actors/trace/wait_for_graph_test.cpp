#include <doctest/doctest.h>

#include "actors/plan/eval_plan.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "actors/trace/wait_for_graph.hpp"

namespace conveyor::testing {
namespace {

using trace::StageSnapshot;
using trace::StageState;

constexpr std::int64_t kSecond = 1'000'000'000;

// 1F1B, 3 stages, 4 micro-batches: rank 1 runs F0 F1 B0 F2 B1 F3 B2 B3.
trace::WaitForContext context() {
  auto layout = make_pipeline_layout(sched::ScheduleSpec{"1f1b", 3, 4, 1}, 3);
  trace::WaitForContext c;
  c.train_plans = layout.schedule.ranks;
  c.placement = layout.placement;
  return c;
}

int slot_of(const trace::WaitForContext& c, int rank, const std::string& action) {
  const auto& plan = c.train_plans[static_cast<std::size_t>(rank)];
  for (std::size_t k = 0; k < plan.size(); ++k)
    if (plan[k].str() == action) return static_cast<int>(k);
  throw std::runtime_error("no " + action);
}

StageSnapshot at(int rank, StageState state, std::int64_t slot, std::int64_t step = 2) {
  return StageSnapshot{rank, state, step + 1, step, false, slot, 0};
}

}  // namespace

TEST_CASE("the wait-for graph reads an eval stage's slot in its wave's plan") {
  auto c = context();
  for (const auto& rank : c.placement.ranks) c.eval_plans.push_back(eval_actions(rank, 0, 40));
  c.eval_wave = 16;
  // The third wave (micro-batches 32 … 39): stage 1 waits at its slot 2 (1F34) for stage 0,
  // which is past 0F34 (slot 3 of its wave: running 0F35): sent, never arrived.
  auto eval_at = [](int rank, StageState state, std::int64_t slot) {
    return StageSnapshot{rank, state, 9, 2, true, slot, 0, 32};
  };
  std::vector<StageSnapshot> s{eval_at(0, StageState::running, 3),
                               eval_at(1, StageState::waiting, 2),
                               eval_at(2, StageState::waiting, 2)};
  const auto g = trace::build_wait_for_graph(s, c, 5 * kSecond);
  CHECK(g.lines[0].find("stage 0 runs 0F35 of eval step 2") == 0);
  CHECK(g.lines[1].find("stage 1 waits for F eval step 2 micro-batch 34 from stage 0 (sent, never arrived)") == 0);
  CHECK(g.lines[2].find("stage 2 waits for F eval step 2 micro-batch 34 from stage 1 (not sent)") == 0);
  CHECK(g.culprit == 0);
}

TEST_CASE("the wait-for graph names the message a stage waits for and that it was never sent") {
  const auto c = context();
  // Stage 0 is stuck inside 0F1; stage 1 waits for F1 from it; stage 2 waits for F1 from 1.
  std::vector<StageSnapshot> s{at(0, StageState::running, slot_of(c, 0, "0F1")),
                               at(1, StageState::waiting, slot_of(c, 1, "1F1")),
                               at(2, StageState::waiting, slot_of(c, 2, "2F1"))};
  const auto g = trace::build_wait_for_graph(s, c, 10 * kSecond);
  REQUIRE(g.lines.size() == 3);
  CHECK(g.lines[0].find("stage 0 runs 0F1 of step 2 (10.0 s so far)") == 0);
  CHECK(g.lines[1].find("stage 1 waits for F step 2 micro-batch 1 from stage 0 (not sent)") == 0);
  CHECK(g.lines[2].find("stage 2 waits for F step 2 micro-batch 1 from stage 1 (not sent)") == 0);
  CHECK(g.waits_for == std::vector<int>{-1, 0, 1});
  CHECK(g.verdict.find("stalled: stage 0 has been running 0F1 of step 2") == 0);
  CHECK(g.culprit == 0);
}

TEST_CASE("the wait-for graph blames a lost message when the sender is already past it") {
  const auto c = context();
  // Stage 0 has run 0F1 and moved on (it waits for B0's gradient), but stage 1 still waits
  // for the activation of micro-batch 1: the message was sent and lost.
  std::vector<StageSnapshot> s{at(0, StageState::waiting, slot_of(c, 0, "0B0")),
                               at(1, StageState::waiting, slot_of(c, 1, "1F1")),
                               at(2, StageState::waiting, slot_of(c, 2, "2F1"))};
  const auto g = trace::build_wait_for_graph(s, c, 3 * kSecond);
  CHECK(g.lines[1].find("stage 1 waits for F step 2 micro-batch 1 from stage 0 (sent, never arrived)") == 0);
  CHECK(g.lines[0].find("stage 0 waits for B step 2 micro-batch 0 from stage 1 (not sent)") == 0);
  CHECK(g.verdict ==
        "message lost: F step 2 micro-batch 1 from stage 0 to stage 1 was sent but never arrived");
  CHECK(g.culprit == 0);
}

TEST_CASE("the wait-for graph names a cycle of stages waiting for each other") {
  // Plans broken by hand: rank 0 waits for the gradient of micro-batch 0, which rank 1
  // produces only after the activation of micro-batch 1, which rank 0 sends only later.
  auto c = context();
  c.train_plans[0] = {sched::Action::parse("0F0"), sched::Action::parse("0B0"),
                      sched::Action::parse("0F1")};
  c.train_plans[1] = {sched::Action::parse("1F1"), sched::Action::parse("1F0"),
                      sched::Action::parse("1B0")};
  std::vector<StageSnapshot> s{at(0, StageState::waiting, 1), at(1, StageState::waiting, 0),
                               at(2, StageState::idle, 0)};
  const auto g = trace::build_wait_for_graph(s, c, 3 * kSecond);
  CHECK(g.lines[0].find("stage 0 waits for B step 2 micro-batch 0 from stage 1 (not sent)") == 0);
  CHECK(g.lines[1].find("stage 1 waits for F step 2 micro-batch 1 from stage 0 (not sent)") == 0);
  CHECK(g.verdict == "deadlock: stage 0 → stage 1 → stage 0");
}

TEST_CASE("the wait-for graph says when stages wait for a plan the coordinator never sent") {
  const auto c = context();
  std::vector<StageSnapshot> s{at(0, StageState::idle, 0), at(1, StageState::idle, 0),
                               at(2, StageState::idle, 0)};
  const auto g = trace::build_wait_for_graph(s, c, 3 * kSecond);
  CHECK(g.lines[1].find("stage 1 finished step 2 and waits for the coordinator's next plan") == 0);
  CHECK(g.verdict.find("stalled: the coordinator sent no plan") == 0);
  CHECK(g.culprit == -1);
}

TEST_CASE("the wait-for graph says a stage past its last action is finishing its step, not at an action it does not have") {
  const auto c = context();
  const auto done = static_cast<std::int64_t>(c.train_plans[1].size());
  // Stage 1 ran all its actions; stage 2 is stuck.
  std::vector<StageSnapshot> s{at(0, StageState::idle, 0), at(1, StageState::waiting, done),
                               at(2, StageState::running, slot_of(c, 2, "2B3"))};
  auto g = trace::build_wait_for_graph(s, c, 4 * kSecond);
  CHECK(g.lines[1] == "stage 1 ran every action of step 2 and finishes it for 4.0 s");
  CHECK(g.culprit == 2);
  // With a second replica (ranks 3-5) such a stage waits in its gradients' all-reduce.
  for (int r = 3; r < 6; ++r) s.push_back(at(r, StageState::idle, 0));
  g = trace::build_wait_for_graph(s, c, 4 * kSecond);
  CHECK(g.lines[1] == "stage 1 ran every action of step 2 and finishes it (its gradients' "
                      "all-reduce with its replicas) for 4.0 s");
}

}  // namespace conveyor::testing
