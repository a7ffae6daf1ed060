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
//   crash:stage=S:step=N[:when=start|optimizer]
//       stage S fails (throws) as it starts train step N, as a crashed stage would, or
//       (when=optimizer) as it is told to take that step's optimizer step, while its peers
//       take theirs; with fault.policy abort the run stops naming the stage, with restart
//       it is respawned
//   hang:stage=S:step=N
//       stage S never starts train step N (its plan is lost on the way in): its peers wait
//       for it until the watchdog (watchdog.timeout_s) diagnoses the hang
//   slow:stage=S:ms=D[:step=N]
//       every compute action (F, B, I, W) of stage S in a train step (step N when given)
//       takes D milliseconds longer: the stage sleeps inside the action, so the time counts
//       as busy time, as a slow device would (a straggler; fault.straggler_*)
//   exit:node=R:step=N[:when=start|checkpoint]
//       the process of node R (0 in a one-process run) dies at once (SIGKILL) as train
//       step N starts on its stages (or, when=checkpoint, as it starts writing its own
//       shards of step N's checkpoint), as a killed or crashed host process would; only in
//       the first attempt (`conveyor train --supervise` restarts it)
//   exit:node=R:when=relayout|restore[:nth=N]
//       the same, at a moment of issue 44's moves onto another layout (a shrink or a grow
//       under way), which take ~20 ms that no kill from outside can aim at: relayout, as
//       node R's directory receives its Nth move (Relayout; N = 1 unless given), before it
//       spawns its actors of the new layout; restore, as a stage of node R is told for the
//       Nth time in this process to load node 0's copy of its state (RestoreFromCopy: after
//       a move, once the new actors took over; a rejoined node's restore too). No step:
//       the moment is the fault's
//   corrupt-checkpoint:step=N
//       the checkpoint written after N completed steps gets a shard whose bytes on disk
//       differ from the sha256 its manifest records (a disk that lies), so resuming from
//       it must fall back to an older one (actors/checkpoint/corrupting_filesystem.hpp)
//   slow-checkpoint:step=N:ms=D
//       the checkpoint written after N completed steps stalls D milliseconds with its
//       shards on disk and its manifest not yet written (a slow disk): a fault meanwhile,
//       a node lost say, meets a checkpoint half written (stalling_filesystem.hpp)
//
// nan, crash and hang fire once: a replayed step after a recovery runs clean, as it
// would after a transient fault.
// Stages are pipeline ranks (0-based), steps count from 0 as in metrics.jsonl.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/fault/message_fault.hpp"

namespace conveyor {

/// The entries' grammar in one line, for the config key reference (the comment above
/// says what each does).
inline constexpr const char* kFaultInjectGrammar =
    "drop:stage=S:step=N[:micro_batch=M][:kind=activation|gradient], delay:stage=S:ms=D[:step=N], "
    "nan:stage=S:step=N, crash:stage=S:step=N[:when=optimizer], hang:stage=S:step=N, "
    "slow:stage=S:ms=D[:step=N], exit:node=R:step=N[:when=checkpoint], exit:node=R:when=relayout|restore[:nth=N], corrupt-checkpoint:step=N, slow-checkpoint:step=N:ms=D";

/// One entry, parsed once where the config is read (RunConfig::fault.inject).
struct FaultSpec {
  std::string text;  // the entry as written: errors quote it, config.yaml writes it back
  enum class Kind { drop, delay, corrupt_checkpoint, nan, crash, hang, exit, slow, slow_checkpoint } kind = Kind::drop;
  int stage = 0;
  int node = 0;  // exit: the process (node rank) that exits
  bool in_optimizer = false;  // crash ...:when=optimizer: in the step's optimizer step
  /// When an exit fires: as step N starts (start), writing its shards of step N's
  /// checkpoint (checkpoint), as its node receives a move (relayout) or its stage a copy
  /// to restore (restore); the last two take no step.
  enum class ExitWhen { start, checkpoint, relayout, restore } exit_when = ExitWhen::start;
  int nth = 1;  // exit when=relayout|restore: at the Nth such moment of the process
  std::optional<std::int64_t> step;
  int micro_batch = -1;  // -1: any
  int message_kind = -1;  // -1: any; else static_cast<int>(PipeKind)
  std::chrono::milliseconds delay{0};  // delay, slow, slow-checkpoint
};

/// Parses one entry; throws std::invalid_argument naming the entry and what is wrong.
FaultSpec parse_fault_spec(const std::string& entry);

/// Ends this process as an exit fault says: `what` on stderr (flushed), then SIGKILL, as
/// a machine that dies would (no destructors, no goodbye to the peers).
[[noreturn]] void die_by_injected_exit(const std::string& what);

/// The steps of the corrupt-checkpoint entries among `entries` (already valid), ascending.
std::vector<std::int64_t> corrupt_checkpoint_steps(const std::vector<FaultSpec>& specs);
/// The slow-checkpoint entries among `specs` (already valid): how long the checkpoint
/// after each step stalls (the longest, for a step named twice).
std::map<std::int64_t, std::chrono::milliseconds> checkpoint_stalls(const std::vector<FaultSpec>& specs);

/// Applies every drop, delay, nan, crash, hang and slow spec to the stages (other kinds are
/// ignored here). Thread-safe (stages call it from their own threads); every spec but
/// delay and slow fires once.
class ScriptedFaults final : public MessageFault {
 public:
  explicit ScriptedFaults(std::vector<FaultSpec> specs);
  bool drop(const PipeMessage& message, int from_rank) override;
  bool poison(const PipeMessage& message, int from_rank) override;
  bool crash(int rank, std::int64_t step) override;
  bool crash_in_optimizer(int rank, std::int64_t step) override;
  bool hang(int rank, std::int64_t step) override;
  std::chrono::milliseconds action_delay(int rank, std::int64_t step, Phase phase) override;
  bool exit_process(std::int64_t step) override;
  bool exit_in_shard_write(std::int64_t steps_done) override;
  bool exit_in_relayout() override;
  bool exit_in_restore() override;

  /// The node this process is (exit specs name one) and whether this is the first attempt
  /// of the run: a process restarted by `conveyor train --supervise` (or by hand, after a
  /// crash) does not exit again, as a real fault would not recur.
  void set_process(int node, bool first_attempt) {
    node_ = node;
    first_attempt_ = first_attempt;
  }

 private:
  /// An exit spec of this node for `step` (at its start, or in its checkpoint's shard
  /// write), on the first attempt only.
  bool exits_at(FaultSpec::ExitWhen when, std::int64_t step) const;
  /// An exit spec of this node for the `nth` moment of kind `when` (relayout, restore).
  bool exits_at_nth(FaultSpec::ExitWhen when, int nth) const;
  std::atomic<int> relayouts_{0}, restores_{0};  // moments of each kind so far

  struct OneShot {
    FaultSpec::Kind kind;
    int stage = 0;
    std::int64_t step = 0;
    std::atomic<bool> fired{false};
    bool in_optimizer = false;
    OneShot(FaultSpec::Kind k, int s, std::int64_t n, bool opt = false)
        : kind(k), stage(s), step(n), in_optimizer(opt) {}
    OneShot(const OneShot& o)
        : kind(o.kind), stage(o.stage), step(o.step), fired(o.fired.load()), in_optimizer(o.in_optimizer) {}
  };
  /// True the first time (kind, rank, step, in_optimizer) matches a spec.
  bool fire(FaultSpec::Kind kind, int rank, std::int64_t step, bool in_optimizer = false);
  std::vector<FaultSpec> specs_;
  std::vector<std::unique_ptr<DropOneMessage>> drops_;  // one per drop spec, in order
  std::vector<OneShot> one_shots_;
  int node_ = 0;
  bool first_attempt_ = true;                       // one per nan, crash, hang spec
};

}  // namespace conveyor
