// Real runs through the actors: a traced training job, and a hang made by losing one
// message, which the watchdog must diagnose and stop.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "actors/coordinator/step_accounting.hpp"
#include "actors/runtime/run_job.hpp"
#include "actors/trace/hang_error.hpp"
#include "actors/trace/trace_check.hpp"
#include "actors/trace/trace_summary.hpp"
#include "tests/actors/support/tiny_job.hpp"

namespace conveyor::testing {
namespace {

struct ReportKeeper final : TrainingObserver {
  std::vector<std::vector<StageReport>> steps;
  void on_step(const StepMetrics&, const std::vector<StageReport>& reports) override {
    steps.push_back(reports);
  }
  void on_eval(const EvalMetrics&) override {}
};

std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

void write_plans(const Job& job, const std::filesystem::path& dir) {
  std::vector<std::vector<sched::Action>> eval;
  for (const auto& r : job.plan.placement.ranks) eval.push_back(eval_actions(r, 0, job.plan.eval_batches));
  std::ofstream(dir / "schedule.json")
      << trace::trace_plans_json(job.plan.schedule, eval, job.plan.eval_wave()).dump();
}

}  // namespace

TEST_CASE("a traced run records every action, links every message, and agrees with its reports") {
  const auto dir = fresh_dir("conveyor_traced_run");
  auto job = tiny_job({.stages = 3, .schedule = "zb-h1", .micro_batches = 6, .steps = 3});
  trace::TraceOptions o;
  o.dir = dir;
  o.steps = *trace::StepRange::parse("1-2");
  job.services.trace = std::make_shared<trace::TraceSession>(o, 3);
  write_plans(job, dir);
  ReportKeeper reports;
  run_training(job, reports);
  job.services.trace.reset();  // the last owner: flushes the file

  const auto set = trace::load_trace_dir(dir);
  const auto check = trace::check_trace(set);
  std::string listing;
  for (const auto& f : check.findings) listing += f.message + "\n";
  INFO(listing);
  CHECK(check.ok());
  CHECK(check.order_checked);
  // Steps 1 and 2 only; the last step has an evaluation round too.
  std::size_t per_step = 0;
  for (const auto& r : job.plan.schedule.ranks) per_step += r.size();
  std::size_t actions = 0;
  for (const auto& r : set.records)
    if (r.kind == trace::RecordKind::action) {
      CHECK((r.step == 1 || r.step == 2));
      ++actions;
    }
  CHECK(actions == 2 * per_step + 3 * static_cast<std::size_t>(job.plan.eval_batches));
  // Causal links: a forward on a later stage cites the receive of its activation, whose
  // send cites the forward that produced it on the stage before.
  std::size_t linked = 0;
  for (const auto& r : set.records) {
    if (r.kind != trace::RecordKind::action || r.stage == 0 ||
        r.action != static_cast<std::uint8_t>(sched::ActionKind::F))
      continue;
    const auto receive = set.find(r.cause);
    REQUIRE(receive >= 0);
    CHECK(set.records[static_cast<std::size_t>(receive)].kind == trace::RecordKind::pipe_receive);
    const auto send = set.find(set.records[static_cast<std::size_t>(receive)].cause);
    REQUIRE(send >= 0);
    const auto producer = set.find(set.records[static_cast<std::size_t>(send)].cause);
    REQUIRE(producer >= 0);
    CHECK(set.records[static_cast<std::size_t>(producer)].stage == r.stage - 1);
    CHECK(set.records[static_cast<std::size_t>(producer)].micro_batch == r.micro_batch);
    ++linked;
  }
  CHECK(linked == 2 * 2 * 6 + 2 * static_cast<std::size_t>(job.plan.eval_batches));

  // The summary's busy time per stage is the reports' action time for the same steps.
  const auto summary = trace::summarize(set);
  REQUIRE(summary.steps == 2);
  REQUIRE(reports.steps.size() == 3);
  std::vector<double> busy_ms(3, 0.0);
  for (std::size_t s = 1; s < 3; ++s)
    for (const auto& rep : reports.steps[s])
      for (const auto& t : rep.timings) busy_ms[static_cast<std::size_t>(rep.rank)] += (t.end_ns - t.start_ns) / 1e6;
  for (int r = 0; r < 3; ++r) {
    INFO("stage " << r);
    CHECK(summary.per_stage[static_cast<std::size_t>(r)].busy_ms == doctest::Approx(busy_ms[static_cast<std::size_t>(r)]).epsilon(1e-9));
  }
  REQUIRE(summary.simulated_bubble.has_value());
  CHECK(*summary.simulated_bubble <= summary.bubble + 0.05);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a lost message makes the watchdog name the waiting stage and stop the run in time") {
  const auto dir = fresh_dir("conveyor_hang_run");
  auto job = tiny_job({.stages = 3, .schedule = "1f1b", .micro_batches = 4, .steps = 4});
  auto drop = std::make_shared<DropOneMessage>(/*from_rank=*/0, /*step=*/2, /*micro_batch=*/1,
                                               static_cast<int>(PipeKind::activation));
  job.services.fault = drop;
  job.plan.watchdog_timeout_s = 1.0;
  trace::TraceOptions o;
  o.dir = dir;
  job.services.trace = std::make_shared<trace::TraceSession>(o, 3);
  ReportKeeper reports;
  const auto start = std::chrono::steady_clock::now();
  std::string diagnosis;
  try {
    run_training(job, reports);
  } catch (const HangError& e) {
    diagnosis = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(diagnosis);
  CHECK(drop->dropped());
  CHECK(reports.steps.size() == 2);  // steps 0 and 1 finished
  CHECK(diagnosis.find("stage 1 waits for F step 2 micro-batch 1 from stage 0 (sent, never arrived)") !=
        std::string::npos);
  CHECK(diagnosis.find("stage 2 waits for F step 2 micro-batch") != std::string::npos);
  CHECK(diagnosis.find("message lost: F step 2 micro-batch 1 from stage 0 to stage 1") !=
        std::string::npos);
  CHECK(diagnosis.find("last ") != std::string::npos);  // the dumped trace records
  CHECK(seconds < 10.0);
  job.services.trace.reset();
  // The trace shows the send that nobody received.
  const auto set = trace::load_trace_dir(dir);
  bool unmatched = false;
  for (const auto& f : trace::check_trace(set).findings)
    unmatched = unmatched || (f.kind == "unmatched_send" &&
                              f.message.find("stage 0 sent activation step 2 micro-batch 1 to stage 1") != std::string::npos);
  CHECK(unmatched);
  std::filesystem::remove_all(dir);
}

}  // namespace conveyor::testing
