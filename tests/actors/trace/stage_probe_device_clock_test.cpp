// A GPU stage's traced actions carry the device's times (kernels/model/action_clock.hpp),
// resolved after the device ran them. The device here is a scripted clock: the interface
// the CUDA model implements (tested against a real stream in gpu_tests).
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <unistd.h>

#include "actors/plan/placement.hpp"
#include "actors/trace/stage_probe.hpp"
#include "actors/trace/trace_file.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor::testing {
namespace {

// Actions "run" when finish() says so, at the times it is given.
class ScriptedClock final : public DeviceActionClock {
 public:
  std::uint64_t begin() override { return ++last_; }
  void end(std::uint64_t token) override { ended.push_back(token); }
  std::vector<DeviceSpan> poll() override { return take(); }
  std::vector<DeviceSpan> drain() override {
    ++drains;
    for (auto t : ended)
      if (!ran.contains(t)) ran[t] = {static_cast<std::int64_t>(t) * 1000, static_cast<std::int64_t>(t) * 1000 + 500};
    return take();
  }
  void finish(std::uint64_t token, std::int64_t start, std::int64_t end) { ran[token] = {start, end}; }

  std::vector<std::uint64_t> ended;
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> ran;
  int drains = 0;

 private:
  std::vector<DeviceSpan> take() {
    std::vector<DeviceSpan> out;
    for (auto it = ran.begin(); it != ran.end();) {
      out.push_back({it->first, it->second.first, it->second.second});
      it = ran.erase(it);
    }
    return out;
  }
  std::uint64_t last_ = 0;
};

std::vector<trace::Record> actions_in(const std::filesystem::path& file) {
  std::vector<trace::Record> out;
  for (const auto& r : trace::read_trace_file(file).records)
    if (r.kind == trace::RecordKind::action) out.push_back(r);
  return out;
}

TEST_CASE("a traced GPU stage's actions take the device's start and end, resolved later") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("conveyor_probe_clock_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const Placement placement = make_placement({2}, 1, 1, [](int, int) { return 0; });
  ScriptedClock clock;
  std::filesystem::path file;
  {
    trace::TraceOptions o;
    o.dir = dir;
    o.host = "h";
    trace::TraceSession session(o, 1);
    file = session.file();
    trace::StageProbe probe(0, /*epoch_ns=*/0, placement, &session.stage(0), nullptr);
    probe.use_device_clocks({&clock});

    StepPlan plan;
    plan.round = plan.step = 1;
    auto actions = std::make_shared<std::vector<sched::Action>>();
    for (int mb = 0; mb < 3; ++mb) actions->push_back({0, sched::ActionKind::F, mb, 0});
    plan.actions = actions;
    probe.plan_received(plan);
    for (std::size_t slot = 0; slot < 3; ++slot) {
      probe.action_started(plan, slot);
      // The host saw the call take 1..2 µs: the enqueue, not the work.
      probe.action_finished(plan, slot, ActionTiming{(*actions)[slot], static_cast<std::int64_t>(slot) * 10,
                                                     static_cast<std::int64_t>(slot) * 10 + 2});
      if (slot == 0) clock.finish(1, 7'000, 9'000);  // the device ran action 1 meanwhile
    }
    CHECK(clock.ended == std::vector<std::uint64_t>{1, 2, 3});
    StageReport report;
    probe.report_sending(report);  // the end of the stage's compute: the rest is drained
    CHECK(clock.drains == 1);
    session.flush_all();
  }
  const auto records = actions_in(file);
  REQUIRE(records.size() == 3);
  std::map<int, trace::Record> by_mb;
  for (const auto& r : records) by_mb[r.micro_batch] = r;
  CHECK(by_mb[0].start_ns == 7'000);  // polled at the next action's start
  CHECK(by_mb[0].end_ns == 9'000);
  CHECK(by_mb[1].start_ns == 2'000);  // drained at the report
  CHECK(by_mb[1].end_ns == 2'500);
  CHECK(by_mb[2].start_ns == 3'000);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an untraced step begins no device timing") {
  const Placement placement = make_placement({2}, 1, 1, [](int, int) { return 0; });
  ScriptedClock clock;
  trace::StageProbe probe(0, 0, placement, nullptr, nullptr);
  probe.use_device_clocks({&clock});
  StepPlan plan;
  plan.round = plan.step = 1;
  plan.actions = std::make_shared<std::vector<sched::Action>>(
      std::vector<sched::Action>{{0, sched::ActionKind::F, 0, 0}});
  probe.plan_received(plan);
  probe.action_started(plan, 0);
  probe.action_finished(plan, 0, ActionTiming{(*plan.actions)[0], 0, 1});
  CHECK(clock.ended.empty());
}

}  // namespace
}  // namespace conveyor::testing
