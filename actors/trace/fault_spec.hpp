#pragma once
// `fault.inject` entries: faults a run injects on purpose, to exercise the watchdog and the
// failure policy end to end.
//
//   drop:stage=S:step=N[:micro_batch=M][:kind=activation|gradient]
//       the first message stage S sends in train step N (matching M and kind when given)
//       is never sent
//   delay:stage=S:ms=D[:step=N]
//       every message stage S sends (in step N when given) leaves D milliseconds late
//   nan:stage=S:step=N
//       the first message stage S sends in train step N (an activation; the last stage's
//       first is a gradient) carries a NaN, as a numerical blow-up there would: the loss
//       or the gradient norm of step N is not finite and fault.on_nan decides
//   crash:stage=S:step=N
//       stage S fails (throws) as it starts train step N, as a crashed stage would; with
//       fault.policy abort the run stops naming the stage
//   corrupt-checkpoint:step=N
//       the checkpoint written after N completed steps gets a shard whose bytes on disk
//       differ from the sha256 its manifest records (a disk that lies), so resuming from
//       it must fall back to an older one (actors/checkpoint/corrupting_filesystem.hpp)
//
// Stages are pipeline ranks (0-based), steps count from 0 as in metrics.jsonl.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/trace/message_fault.hpp"

namespace conveyor {

struct FaultSpec {
  enum class Kind { drop, delay, corrupt_checkpoint, nan, crash } kind = Kind::drop;
  int stage = 0;
  std::optional<std::int64_t> step;
  int micro_batch = -1;  // -1: any
  int message_kind = -1;  // -1: any; else static_cast<int>(PipeKind)
  std::chrono::milliseconds delay{0};
};

/// Parses one entry; throws std::invalid_argument naming the entry and what is wrong.
FaultSpec parse_fault_spec(const std::string& entry);

/// The steps of the corrupt-checkpoint entries among `entries` (already valid), ascending.
std::vector<std::int64_t> corrupt_checkpoint_steps(const std::vector<FaultSpec>& specs);

/// Applies every drop, delay, nan and crash spec to the messages stages send (other kinds are
/// ignored here). Thread-safe (stages call it from their own threads); a drop or nan spec
/// fires once.
class ScriptedFaults final : public MessageFault {
 public:
  explicit ScriptedFaults(std::vector<FaultSpec> specs);
  bool drop(const PipeMessage& message, int from_rank) override;
  bool poison(const PipeMessage& message, int from_rank) override;
  bool crash(int rank, std::int64_t step) override;

 private:
  struct Poison {
    int stage = 0;
    std::int64_t step = 0;
    std::atomic<bool> fired{false};
    Poison(int s, std::int64_t k) : stage(s), step(k) {}
    Poison(const Poison& o) : stage(o.stage), step(o.step), fired(o.fired.load()) {}
  };
  std::vector<FaultSpec> specs_;
  std::vector<std::unique_ptr<DropOneMessage>> drops_;  // one per drop spec, in order
  std::vector<Poison> poisons_;                          // one per nan spec
};

}  // namespace conveyor
