#pragma once
// Synthetic traces for the analysis tests: a schedule "executed" by the simulator, as the
// records a run would have written (actions, PipeMessage sends and receives with their
// causal links). Tests then break them on purpose (swap actions, drop a receive, …).
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "actors/plan/schedule/simulator.hpp"
#include "actors/trace/trace_set.hpp"

namespace conveyor::testing {

struct SyntheticTrace {
  std::vector<trace::Record> records;  // every writer's, unsorted
  trace::TracePlans plans;

  trace::TraceSet set() const {
    trace::TraceFile f;
    f.header.host = "test";
    f.records = records;
    return trace::merge_trace_files({f}, plans);
  }
};

/// `steps` train rounds of `schedule` with F = 1 ms, B = 2 ms (I, W = 1 ms), messages
/// arriving 0.1 ms after their send.
inline SyntheticTrace simulated_trace(const sched::Schedule& schedule, int steps = 1) {
  using namespace trace;
  SyntheticTrace t;
  t.plans.train = schedule;
  auto costs = sched::SimCosts::uniform(1000, 2000, 1000, 1000);
  costs.latency_us = 100;
  const auto sim = sched::simulate(schedule, costs);
  std::vector<std::uint64_t> seq(static_cast<std::size_t>(schedule.spec.stages) + 1, 0);
  auto id = [&](int stage) { return make_id(writer_of_stage(stage), ++seq[static_cast<std::size_t>(stage + 1)]); };
  const int last = schedule.model_stages() - 1;
  for (int step = 0; step < steps; ++step) {
    const std::int64_t base = static_cast<std::int64_t>(step) * static_cast<std::int64_t>(sim.makespan * 1000 + 1e6);
    // (gradient?, model stage, micro-batch) of the consumer → its receive's id
    std::map<std::tuple<bool, int, int>, std::uint64_t> receive_of;
    std::vector<std::pair<std::size_t, std::tuple<bool, int, int>>> consumers;
    for (std::size_t r = 0; r < sim.timings.size(); ++r)
      for (const auto& ta : sim.timings[r]) {
        const auto& a = ta.action;
        Record rec;
        rec.kind = RecordKind::action;
        rec.id = id(a.stage);
        rec.stage = static_cast<std::int16_t>(a.stage);
        rec.step = step;
        rec.round = static_cast<std::uint32_t>(step + 1);
        rec.micro_batch = a.micro_batch;
        rec.chunk = static_cast<std::uint8_t>(a.chunk);
        rec.action = static_cast<std::uint8_t>(a.kind);
        rec.start_ns = base + static_cast<std::int64_t>(ta.start_us * 1000);
        rec.end_ns = base + static_cast<std::int64_t>(ta.end_us * 1000);
        t.records.push_back(rec);
        const int ms = schedule.model_stage(a.stage, a.chunk);
        const bool f = a.kind == sched::ActionKind::F;
        if ((f && ms > 0) || (sched::is_input_backward(a.kind) && ms < last))
          consumers.emplace_back(t.records.size() - 1, std::tuple{!f, ms, a.micro_batch});
        int to = -1;
        if (f && ms < last) to = ms + 1;
        if (sched::is_input_backward(a.kind) && ms > 0) to = ms - 1;
        if (to < 0) continue;
        const auto dest = schedule.holder(to);
        Record send = rec;
        send.kind = RecordKind::pipe_send;
        send.id = id(a.stage);
        send.cause = rec.id;
        send.start_ns = send.end_ns = rec.end_ns;
        send.peer = static_cast<std::int16_t>(dest.rank);
        send.action = static_cast<std::uint8_t>(f ? sched::ActionKind::F : sched::ActionKind::B);
        send.bytes = 4096;
        t.records.push_back(send);
        Record recv = send;
        recv.kind = RecordKind::pipe_receive;
        recv.id = id(dest.rank);
        recv.cause = send.id;
        recv.stage = static_cast<std::int16_t>(dest.rank);
        recv.peer = static_cast<std::int16_t>(a.stage);
        recv.chunk = static_cast<std::uint8_t>(dest.chunk);
        recv.start_ns = recv.end_ns = rec.end_ns + 100'000;
        t.records.push_back(recv);
        receive_of[{!f, to, a.micro_batch}] = recv.id;
      }
    for (auto& [index, key] : consumers) t.records[index].cause = receive_of.at(key);
  }
  return t;
}

/// `part`'s rounds appended to `into` as a run goes on (issue 44: on another layout):
/// rounds and steps moved on by `rounds` and `steps`, times by `ns`, and every id of a
/// writer counted on from the highest sequence that writer has in `into` (causes too).
inline void append_rounds(SyntheticTrace& into, const SyntheticTrace& part, std::uint32_t rounds,
                          std::int64_t steps, std::int64_t ns) {
  using namespace trace;
  constexpr std::uint64_t kSequence = (std::uint64_t{1} << kWriterShift) - 1;
  std::map<std::uint64_t, std::uint64_t> highest;  // writer → its highest sequence in `into`
  for (const auto& r : into.records)
    highest[r.id >> kWriterShift] = std::max(highest[r.id >> kWriterShift], r.id & kSequence);
  auto moved = [&](std::uint64_t id) { return id == 0 ? id : id + highest[id >> kWriterShift]; };
  for (Record r : part.records) {
    r.id = moved(r.id);
    r.cause = moved(r.cause);
    r.round += rounds;
    r.step += steps;
    r.start_ns += ns;
    r.end_ns += ns;
    into.records.push_back(r);
  }
}

/// Index of the action record (stage, kind, micro-batch) of `step`.
inline std::size_t find_action(const SyntheticTrace& t, int stage, sched::ActionKind kind,
                               int micro_batch, std::int64_t step = 0) {
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const auto& r = t.records[i];
    if (r.kind == trace::RecordKind::action && r.stage == stage &&
        r.action == static_cast<std::uint8_t>(kind) && r.micro_batch == micro_batch && r.step == step)
      return i;
  }
  throw std::runtime_error("no such action in the synthetic trace");
}

}  // namespace conveyor::testing
