#pragma once
// Fault injection into stages, for tests of the watchdog and the failure policy: an
// interface the stage actor asks before it sends a PipeMessage to another stage (lost,
// NaN-poisoned) and as it starts a step (crashed). The run never has one
// unless a test (or a fault.* config key, later) installs it.
#include <atomic>
#include <chrono>
#include <cstdint>

#include "actors/plan/protocol.hpp"

namespace conveyor {

class MessageFault {
 public:
  virtual ~MessageFault() = default;
  /// True: the message from `from_rank` is lost. Called from any stage's thread.
  virtual bool drop(const PipeMessage& message, int from_rank) = 0;
  /// True: the message's tensor gets a NaN before it leaves (a numerical fault upstream).
  virtual bool poison(const PipeMessage& /*message*/, int /*from_rank*/) { return false; }
  /// True: stage `rank` fails as it starts train step `step` (a crashed stage).
  virtual bool crash(int /*rank*/, std::int64_t /*step*/) { return false; }
  /// True: stage `rank` fails as it is told to take train step `step`'s optimizer step.
  virtual bool crash_in_optimizer(int /*rank*/, std::int64_t /*step*/) { return false; }
  /// True: this process exits hard (SIGKILL) as train step `step` starts on its stages.
  virtual bool exit_process(std::int64_t /*step*/) { return false; }
  /// True: this process exits hard (SIGKILL) as it starts writing a shard of its own of
  /// the checkpoint after `steps_done` steps (checkpoint.writers every_node).
  virtual bool exit_in_shard_write(std::int64_t /*steps_done*/) { return false; }
  /// True: this process exits hard (SIGKILL) as its node directory receives a move onto
  /// another layout (issue 44's Relayout), before it spawns its actors of that layout.
  virtual bool exit_in_relayout() { return false; }
  /// True: this process exits hard (SIGKILL) as a stage of it is told to load node 0's
  /// copy of its state (RestoreFromCopy: after a move onto another layout, or a rejoin).
  virtual bool exit_in_restore() { return false; }
  /// True: stage `rank` never starts train step `step` (a hung stage).
  virtual bool hang(int /*rank*/, std::int64_t /*step*/) { return false; }
  /// Extra time every compute action of stage `rank` in `step` (of `phase`) takes: it
  /// sleeps inside the action, so the time counts as busy time (a straggler).
  virtual std::chrono::milliseconds action_delay(int /*rank*/, std::int64_t /*step*/,
                                                 Phase /*phase*/) {
    return {};
  }
};

/// Drops the first message that `from_rank` sends in train step `step` (of `kind`, for
/// `micro_batch`; -1 matches any), and nothing else.
class DropOneMessage final : public MessageFault {
 public:
  DropOneMessage(int from_rank, std::int64_t step, int micro_batch = -1, int kind = -1)
      : from_rank_(from_rank), step_(step), micro_batch_(micro_batch), kind_(kind) {}
  bool drop(const PipeMessage& m, int from_rank) override {
    if (from_rank != from_rank_ || m.step != step_ || m.phase != Phase::train) return false;
    if (micro_batch_ >= 0 && m.micro_batch != micro_batch_) return false;
    if (kind_ >= 0 && static_cast<int>(m.kind) != kind_) return false;
    return !dropped_.exchange(true);
  }
  bool dropped() const { return dropped_.load(); }

 private:
  int from_rank_;
  std::int64_t step_;
  int micro_batch_;
  int kind_;
  std::atomic<bool> dropped_{false};
};

}  // namespace conveyor
