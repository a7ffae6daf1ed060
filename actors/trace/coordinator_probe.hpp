#pragma once
// The coordinator's side of the trace: step markers, plan and optimizer sends, report
// and OptimizerDone receives, written into the coordinator's own TraceBuffer (no lock).
// A probe without a buffer does nothing. Thread-safety: the coordinator's; CAF-free.
#include <cstdint>

#include "actors/plan/protocol.hpp"
#include "actors/trace/trace_buffer.hpp"

namespace conveyor::trace {

class CoordinatorProbe {
 public:
  explicit CoordinatorProbe(TraceBuffer* buffer = nullptr) : buffer_(buffer) {}

  /// A new round (train or eval plan) of `step` begins.
  void round_started(std::int64_t round, std::int64_t step, Phase phase);
  void plan_sending(StepPlan& plan, int rank);
  void report_received(const StageReport& report);
  void optimizer_sending(OptimizerStep& step, int rank);
  void done_received(const OptimizerDone& done);
  /// Issue 44: the job moved onto another layout `ms` ago until now (the re-plan's own
  /// time, ReplanEvent::ms): a shrink when node `node` was lost for good, a grow when it
  /// was taken in (`joined`); the run goes on from `step`. Drawn on the timeline so that
  /// the steps around it are not read as slow ones. Recorded whatever trace.steps says: the
  /// trace's analysis pairs each round with the layout that ran it by these records.
  void relaid_out(bool joined, int node, std::int64_t step, double ms);

 private:
  bool tracing(std::int64_t step) const { return buffer_ && buffer_->wants(step); }
  Record base(RecordKind kind, std::int64_t step) const;
  TraceBuffer* buffer_;
  std::int64_t round_ = 0;
  Phase phase_ = Phase::train;
  std::uint64_t round_record_ = 0;
};

}  // namespace conveyor::trace
