#include <doctest/doctest.h>

#include <algorithm>

#include "actors/trace/trace_check.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "tests/actors/trace/trace_builder.hpp"

namespace conveyor::testing {
namespace {

using sched::ActionKind;

SyntheticTrace one_f_one_b(int steps = 1) {
  return simulated_trace(sched::make_schedule({"1f1b", 3, 4, 1}), steps);
}

bool has(const trace::CheckResult& r, const std::string& kind, const std::string& text) {
  return std::any_of(r.findings.begin(), r.findings.end(), [&](const trace::Finding& f) {
    return f.kind == kind && f.message.find(text) != std::string::npos;
  });
}

std::string listing(const trace::CheckResult& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.kind + ": " + f.message + "\n";
  return s;
}

}  // namespace

TEST_CASE("trace check passes a trace that follows its schedule") {
  const auto result = trace::check_trace(one_f_one_b(2).set());
  INFO(listing(result));
  CHECK(result.ok());
  CHECK(result.order_checked);
  CHECK(result.rounds_checked == 2);
  CHECK(result.messages_checked > 0);
}

TEST_CASE("trace check flags a stage that ran two actions in swapped order") {
  auto t = one_f_one_b();
  // Stage 1 runs F1 and B0 the other way round (times swapped, so the order by start flips).
  auto& f1 = t.records[find_action(t, 1, ActionKind::F, 1)];
  auto& b0 = t.records[find_action(t, 1, ActionKind::B, 0)];
  std::swap(f1.start_ns, b0.start_ns);
  std::swap(f1.end_ns, b0.end_ns);
  REQUIRE(b0.start_ns < f1.start_ns);
  const auto result = trace::check_trace(t.set());
  INFO(listing(result));
  CHECK(has(result, "order", "stage 1 step 0"));
  CHECK(std::count_if(result.findings.begin(), result.findings.end(),
                      [](const auto& f) { return f.kind == "order"; }) == 1);
}

TEST_CASE("trace check flags a stage that never ran an action of its plan") {
  auto t = one_f_one_b();
  t.records.erase(t.records.begin() + static_cast<std::ptrdiff_t>(find_action(t, 2, ActionKind::B, 3)));
  const auto result = trace::check_trace(t.set());
  INFO(listing(result));
  CHECK(has(result, "order", "never ran"));
}

TEST_CASE("trace check flags a send whose receive is missing and a receive without its send") {
  auto t = one_f_one_b();
  // Drop the receive of stage 0's activation for micro-batch 2.
  auto recv = std::find_if(t.records.begin(), t.records.end(), [](const trace::Record& r) {
    return r.kind == trace::RecordKind::pipe_receive && r.stage == 1 && r.micro_batch == 2 &&
           r.action == static_cast<std::uint8_t>(ActionKind::F);
  });
  REQUIRE(recv != t.records.end());
  t.records.erase(recv);
  // And point another receive at a send that is not in the trace.
  auto other = std::find_if(t.records.begin(), t.records.end(), [](const trace::Record& r) {
    return r.kind == trace::RecordKind::pipe_receive && r.stage == 2 && r.micro_batch == 0;
  });
  REQUIRE(other != t.records.end());
  other->cause = trace::make_id(9, 999);
  const auto result = trace::check_trace(t.set());
  INFO(listing(result));
  CHECK(has(result, "unmatched_send", "stage 0 sent activation step 0 micro-batch 2 to stage 1"));
  CHECK(has(result, "unmatched_receive", "stage 2 received activation step 0 micro-batch 0"));
}

TEST_CASE("trace check flags messages on one link that arrived out of order") {
  auto t = one_f_one_b();
  // Activations 0 and 1 from stage 0 to stage 1: the later one arrives first.
  std::vector<trace::Record*> recvs;
  for (auto& r : t.records)
    if (r.kind == trace::RecordKind::pipe_receive && r.stage == 1 && r.micro_batch <= 1 &&
        r.action == static_cast<std::uint8_t>(ActionKind::F))
      recvs.push_back(&r);
  REQUIRE(recvs.size() == 2);
  auto* first = recvs[0]->micro_batch == 0 ? recvs[0] : recvs[1];
  auto* second = recvs[0]->micro_batch == 0 ? recvs[1] : recvs[0];
  first->start_ns = first->end_ns = second->start_ns + 1;
  const auto result = trace::check_trace(t.set());
  INFO(listing(result));
  CHECK(has(result, "out_of_order", "stage 1 received activation step 0 micro-batch 1 from stage 0 before"));
}

}  // namespace conveyor::testing
