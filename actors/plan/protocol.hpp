#pragma once
// The data of the pipeline protocol, as plain values (no CAF here, so the stage and
// coordinator logic can be tested without an actor system; actors/messages/messages.hpp makes
// them CAF messages).
// Tensors travel as handles (shared storage): a hand-off, never a copy or a
// serialisation inside one process.
//
// Protocol for one step (coordinator C, stage actors S_r):
//   C → S_r   StepPlan        (one per rank per step: the rank's action list)
//   S_r → S_q PipeMessage     (activation forward, gradient backward; as actions finish)
//   S_r → C   StageReport     (when the rank's list is done: losses, gradient norms, timings)
//   C → S_r   OptimizerStep   (train steps only; every rank steps together) → OptimizerDone
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/plan/schedule/action.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {


enum class Phase : std::uint8_t { train, eval };

inline const char* phase_name(Phase p) { return p == Phase::train ? "train" : "eval"; }

struct StepPlan {
  std::int64_t round = 0;  // counts plans of the run (train and eval), from 1
  std::int64_t step = 0;
  Phase phase = Phase::train;
  std::shared_ptr<const std::vector<sched::Action>> actions;  // this rank's list
  std::uint64_t trace_id = 0;  // id of the trace record of its send (0: not traced)
};

enum class PipeKind : std::uint8_t { activation, gradient };

inline const char* pipe_kind_name(PipeKind k) {
  return k == PipeKind::activation ? "activation" : "gradient";
}

/// An activation going to model stage `to_model_stage` (forward) or a gradient going
/// back to it (backward), for one micro-batch of one step.
struct PipeMessage {
  PipeKind kind = PipeKind::activation;
  std::int64_t round = 0;  // the StepPlan it belongs to
  std::int64_t step = 0;
  Phase phase = Phase::train;
  int micro_batch = 0;
  int from_model_stage = 0;
  int to_model_stage = 0;
  Tensor tensor;
  std::uint64_t trace_id = 0;  // id of the trace record of its send: the receive links to it
};

/// A PipeMessage without its tensor: what crosses processes over CAF while the payload
/// moves on the edge's channel (actors/cluster/). The receiver checks shape and dtype
/// against what it expects before it posts the receive.
struct PipeHeader {
  PipeKind kind = PipeKind::activation;
  std::int64_t round = 0;
  std::int64_t step = 0;
  Phase phase = Phase::train;
  int micro_batch = 0;
  int from_model_stage = 0;
  int to_model_stage = 0;
  std::vector<std::int64_t> shape;
  DType dtype = DType::f32;
  std::uint64_t trace_id = 0;  // the PipeMessage's: a trace's flow crosses processes too
};

/// Version of the messages that cross processes (wire_format.hpp): every node reports it
/// at the rendezvous, and a job whose nodes disagree does not start. Bump it when a
/// message that crosses processes changes.
// 2: trace ids; 3: OptimizerStep::skip; 4: StageReport::round; 5: recovery messages,
// snapshot copies, NodeStages::directory/ucx_address, ChannelFailure::round;
// 6: StageReport::allreduce_busy_ms/allreduce_exposed_ms, tags of the final weights by
// stage actor, of activations and gradients by replica (edge_tags.hpp);
// 7: OptimizerDone::allgather_ms (optim.shard_state); 8: ProgressReport (the hang
// watchdog across processes); 9: CopySnapshot (checkpoints without buddy copies); 10: WriteShard, ShardWritten
// (checkpoint.writers every_node)
inline constexpr int kProtocolVersion = 10;

/// Start and end of one executed action, nanoseconds since the run's epoch.
struct ActionTiming {
  sched::Action action;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// Sum of squared gradients per parameter of one model stage, in parameter order.
struct ModelStageGradSquares {
  int model_stage = 0;
  std::vector<double> squares;
};

struct StageReport {
  int rank = 0;
  std::int64_t round = 0;  // the StepPlan it reports on (a report of an aborted round is stale)
  std::int64_t step = 0;
  Phase phase = Phase::train;
  std::vector<std::pair<int, double>> losses;     // (micro-batch, loss) from the last model stage
  std::vector<ModelStageGradSquares> grad_squares;  // train only
  std::vector<ActionTiming> timings;
  std::uint64_t trace_id = 0;  // id of the trace record of its send (0: not traced)
  // Data parallelism, train only: this step's gradient averaging (busy: the reductions'
  // own time; exposed: how long the stage waited for them after its compute was done).
  double allreduce_busy_ms = 0.0;
  double allreduce_exposed_ms = 0.0;
};

struct OptimizerStep {
  std::int64_t step = 0;
  double lr = 0.0;
  float grad_scale = 1.0f;
  std::uint64_t trace_id = 0;  // id of the trace record of its send (0: not traced)
  /// fault.on_nan skip: drop this step's gradients, no update (the AdamW step count stays).
  bool skip = false;
};

struct OptimizerDone {
  int rank = 0;
  std::int64_t step = 0;
  /// optim.shard_state: how long the weights' all-gather after the update took (0 without).
  double allgather_ms = 0.0;
  std::uint64_t trace_id = 0;  // id of the trace record of its send (0: not traced)
};

/// The final parameters of one model stage, in parameter order (handles, not copies).
struct ModelStageWeights {
  int model_stage = 0;
  std::vector<NamedTensor> tensors;
};

struct WeightsReply {
  int rank = 0;
  std::vector<ModelStageWeights> model_stages;
};

}  // namespace conveyor
