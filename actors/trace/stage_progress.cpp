#include "actors/trace/stage_progress.hpp"

namespace conveyor::trace {

void StageProgress::publish(StageState state, std::int64_t round, std::int64_t step, bool eval,
                            std::int64_t slot, std::int64_t since_ns,
                            std::int64_t first_micro_batch) {
  const auto v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  state_.store(static_cast<std::uint8_t>(state), std::memory_order_relaxed);
  round_.store(round, std::memory_order_relaxed);
  step_.store(step, std::memory_order_relaxed);
  eval_.store(eval, std::memory_order_relaxed);
  slot_.store(slot, std::memory_order_relaxed);
  since_ns_.store(since_ns, std::memory_order_relaxed);
  first_micro_batch_.store(first_micro_batch, std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
}

StageSnapshot StageProgress::read(int rank) const {
  StageSnapshot s;
  s.rank = rank;
  for (;;) {
    const auto v1 = version_.load(std::memory_order_acquire);
    s.state = static_cast<StageState>(state_.load(std::memory_order_relaxed));
    s.round = round_.load(std::memory_order_relaxed);
    s.step = step_.load(std::memory_order_relaxed);
    s.eval = eval_.load(std::memory_order_relaxed);
    s.slot = slot_.load(std::memory_order_relaxed);
    s.since_ns = since_ns_.load(std::memory_order_relaxed);
    s.first_micro_batch = first_micro_batch_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (v1 % 2 == 0 && v1 == version_.load(std::memory_order_relaxed)) return s;
  }
}

ProgressBoard::ProgressBoard(int stages) {
  for (int r = 0; r < stages; ++r) stages_.push_back(std::make_unique<StageProgress>());
}

std::vector<StageSnapshot> ProgressBoard::snapshot() const {
  std::vector<StageSnapshot> out;
  for (std::size_t r = 0; r < stages_.size(); ++r) out.push_back(stages_[r]->read(static_cast<int>(r)));
  return out;
}

}  // namespace conveyor::trace
