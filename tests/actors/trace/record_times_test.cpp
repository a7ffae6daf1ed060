// `conveyor trace summary` over records whose times no run can write: refused naming the
// record (stage, action, step), never summed into a negative bubble.
#include <doctest/doctest.h>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/trace/trace_summary.hpp"
#include "kernels/common/error.hpp"
#include "tests/actors/trace/trace_builder.hpp"

namespace conveyor::testing {
namespace {

std::string summary_error(const SyntheticTrace& t) {
  try {
    const auto s = trace::summarize(t.set());
    CHECK(s.bubble >= 0);  // had it been summarised, never below zero
    for (const auto& st : s.per_stage) CHECK(st.bubble_ms >= 0);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("trace summary refuses an action that ends far beyond its step, naming its stage, action and step") {
  auto t = simulated_trace(sched::make_schedule({"1f1b", 4, 4, 1}), 2);
  CHECK(summary_error(t).empty());
  auto& f = t.records[find_action(t, 1, sched::ActionKind::F, 2, 0)];
  f.end_ns = f.start_ns + 4'000'000'000'000'000'000;  // 127 years: the sums would wrap below zero
  const std::string error = summary_error(t);
  CAPTURE(error);
  CHECK(contains(error, "stage 1's action 1F2 of train step 0"));
  CHECK(contains(error, "lasts 4e+09 s"));

  // Less absurd, still impossible: it ends after step 1 began (round 2's first record),
  // where the coordinator starts a round only once every stage reported the last one.
  t = simulated_trace(sched::make_schedule({"1f1b", 4, 4, 1}), 2);
  auto& b = t.records[find_action(t, 2, sched::ActionKind::B, 1, 0)];
  b.end_ns += 30'000'000'000;  // 30 s
  const std::string later = summary_error(t);
  CAPTURE(later);
  CHECK(contains(later, "stage 2's action 2B1 of train step 0"));
  CHECK(contains(later, " s after round 2 began"));
}

TEST_CASE("trace summary refuses an action that ends before it starts, naming it") {
  auto t = simulated_trace(sched::make_schedule({"gpipe", 2, 2, 1}), 1);
  auto& f = t.records[find_action(t, 0, sched::ActionKind::F, 1, 0)];
  f.end_ns = f.start_ns - 5;
  const std::string error = summary_error(t);
  CAPTURE(error);
  CHECK(contains(error, "stage 0's action 0F1 of train step 0"));
  CHECK(contains(error, "ends before it starts"));
}

}  // namespace conveyor::testing
