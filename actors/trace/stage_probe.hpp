#pragma once
// A stage's eyes for the tracer and the hang watchdog. The stage actor calls it where
// messages come and go; the StageWorker calls it around every action (ActionListener).
// It writes trace records into the stage's own TraceBuffer (no lock) and publishes the
// stage's state to the watchdog's ProgressBoard (a few relaxed stores). Either may be
// absent: a probe with neither costs a null check per call.
//
// Causal links it keeps: an action cites the receive of its input message (or, with no
// input, the plan's receive), a send cites the action that produced it, a receive cites
// the send whose id the message carries.
// Times are the host steady clock of the stage thread. A GPU stage's actions only enqueue
// work, so with use_device_clocks() a traced action takes its start and end from the
// device (kernels/model/action_clock.hpp): its record waits until the device has run it,
// is completed by polling at every later action, and by draining at each report (the end
// of the stage's compute in a step, where the stage waits for the coordinator anyway).
// Thread-safety: one stage's thread (the actor's); CAF-free.
#include <cstdint>
#include <vector>

#include "actors/plan/action_listener.hpp"
#include "actors/plan/placement.hpp"
#include "actors/plan/protocol.hpp"
#include "actors/trace/stage_progress.hpp"
#include "actors/trace/trace_buffer.hpp"
#include "kernels/model/action_clock.hpp"

namespace conveyor::trace {

/// Steady clock now, ns.
std::int64_t now_ns();

class StageProbe final : public ActionListener {
 public:
  /// `epoch_ns`: the StageWorker's epoch on the steady clock (its ActionTimings count from
  /// it). REQUIRES: `placement` outlives the probe.
  StageProbe(int rank, std::int64_t epoch_ns, const Placement& placement, TraceBuffer* buffer,
             StageProgress* progress);

  void plan_received(const StepPlan& plan);
  /// Before `message` goes to `peer_rank`: gives it its trace id.
  void sending(PipeMessage& message, int peer_rank);
  /// As a PipeMessage comes out of the mailbox (or from this stage itself).
  void received(const PipeMessage& message);
  void report_sending(StageReport& report);
  void optimizer_received(const OptimizerStep& step);
  void done_sending(OptimizerDone& done);
  /// A recovery aborted the plan: the stage is idle again (its trace records so far stay).
  void plan_aborted();

  /// The device clock of each chunk's model, by chunk (null: that chunk's host times).
  void use_device_clocks(std::vector<DeviceActionClock*> by_chunk);

  void action_started(const StepPlan& plan, std::size_t slot) override;
  void action_finished(const StepPlan& plan, std::size_t slot, const ActionTiming& timing) override;

 private:
  bool tracing() const { return buffer_ && buffer_->wants(step_); }
  std::size_t input_key(bool gradient, int model_stage, int micro_batch);
  Record base(RecordKind kind, std::int64_t t) const;

  int rank_;
  std::int64_t epoch_ns_;
  const Placement& placement_;
  TraceBuffer* buffer_;
  StageProgress* progress_;
  std::int64_t round_ = 0, step_ = 0;
  std::int64_t first_mb_ = 0;  // the plan's lowest micro-batch (StageSnapshot)
  Phase phase_ = Phase::train;
  std::uint64_t plan_record_ = 0;     // this plan's receive
  std::uint64_t current_action_ = 0;  // the running action's id (cause of its sends)
  std::uint64_t optimizer_record_ = 0;
  // Receive record of each pending input, by (gradient?, model stage, micro-batch).
  std::vector<std::uint64_t> input_cause_;
  // Device times: the running action's clock and token, and traced actions whose device
  // times are not known yet.
  struct AwaitingDevice {
    Record record;
    DeviceActionClock* clock = nullptr;
    std::uint64_t token = 0;
  };
  void resolve_device_times(bool wait);
  std::vector<DeviceActionClock*> clocks_;
  DeviceActionClock* action_clock_ = nullptr;
  std::uint64_t action_token_ = 0;
  std::vector<AwaitingDevice> awaiting_;
};

}  // namespace conveyor::trace
