#pragma once
// What each stage is doing now, published for the hang watchdog: a few atomics per
// stage, written by the stage's own thread at every action boundary (relaxed stores, no
// lock) and read from the watchdog's thread as a consistent snapshot (a version counter,
// odd while a write is under way, as in a seqlock).
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace conveyor::trace {

enum class StageState : std::uint8_t {
  idle,     // no plan: finished the last one (or not started), waits for the coordinator
  waiting,  // has a plan; the action at `slot` waits for its input message
  running,  // runs the action at `slot`
};

struct StageSnapshot {
  int rank = 0;
  StageState state = StageState::idle;
  std::int64_t round = 0;
  std::int64_t step = 0;
  bool eval = false;
  std::int64_t slot = 0;      // next action (waiting) or current one (running)
  std::int64_t since_ns = 0;  // steady clock ns when it entered this state
  // The lowest micro-batch of the plan: an evaluation's wave (actors/plan/eval_plan.hpp).
  std::int64_t first_micro_batch = 0;
};

class StageProgress {
 public:
  /// The stage's own thread only.
  void publish(StageState state, std::int64_t round, std::int64_t step, bool eval,
               std::int64_t slot, std::int64_t since_ns, std::int64_t first_micro_batch = 0);
  /// Any thread.
  StageSnapshot read(int rank) const;

 private:
  std::atomic<std::uint64_t> version_{0};
  std::atomic<std::uint8_t> state_{0};
  std::atomic<bool> eval_{false};
  std::atomic<std::int64_t> round_{0}, step_{0}, slot_{0}, since_ns_{0}, first_micro_batch_{0};
};

/// One StageProgress per rank.
class ProgressBoard {
 public:
  explicit ProgressBoard(int stages);
  StageProgress& stage(int rank) { return *stages_.at(static_cast<std::size_t>(rank)); }
  std::vector<StageSnapshot> snapshot() const;
  int stages() const { return static_cast<int>(stages_.size()); }

 private:
  std::vector<std::unique_ptr<StageProgress>> stages_;
};

}  // namespace conveyor::trace
