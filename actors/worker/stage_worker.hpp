#pragma once
// The logic of one pipeline stage (rank), free of CAF so it can be tested directly:
// it holds the rank's model chunks and optimizer state, runs its action list for a step
// in order, and checks every incoming message against that list.
//
// Invariants:
// - Actions run strictly in list order; an action whose input has not arrived blocks
//   the ones after it (the schedule, not arrival order, decides the order of work).
// - A message is accepted only if a not-yet-run action of the current plan consumes it
//   and its shape and dtype are the ones that action expects; anything else is a
//   ProtocolError naming what arrived and what was expected.
// - Weight gradients accumulate in the order the plan runs W (or B): generated
//   schedules keep micro-batch order, which makes weights independent of the split.
// - With StageData::gradient_shares n > 1 (a job shrunk to fewer replicas) the step's
//   micro-batches are n configured replicas' shares: each share accumulates from zero
//   and the shares are averaged after the last (share_gradients.hpp), before the
//   replicas' own averaging, so the weights are the configured replicas' bit for bit.
//   Several replicas of a shrunk job (StageData::replica_shares) do not average: each
//   gathers every replica's shares over the group after the step's compute and adds all
//   of them (ShareGradients::gather_and_combine), so every replica holds the same bits.
// Thread-safety: none; one actor owns a worker.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/plan/action_listener.hpp"
#include "actors/plan/placement.hpp"
#include "actors/plan/protocol.hpp"
#include "actors/plan/stage_data.hpp"
#include "actors/worker/gradient_shares.hpp"
#include "actors/worker/replica_gradients.hpp"
#include "actors/worker/share_gradients.hpp"
#include "actors/worker/tied_embeddings.hpp"
#include "kernels/data/micro_batch_sampler.hpp"
#include "kernels/data/token_corpus.hpp"
#include "kernels/model/stage_model.hpp"
#include "transport/collective/gradient_all_reduce.hpp"
#include "transport/tensor_channel.hpp"

namespace conveyor {

class MessageFault;  // actors/fault/message_fault.hpp

/// A message that the stage's plan does not expect: wrong step, micro-batch, shape,
/// dtype, or a duplicate.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class StageWorker {
 public:
  using Clock = std::chrono::steady_clock;
  /// Called for every message the worker produces; the actor routes it.
  using Outbox = std::function<void(PipeMessage)>;

  /// Builds one model per chunk of `placement` with `make_model` (CPU by default).
  StageWorker(const GptConfig& model, const RankPlacement& placement, int model_stages,
              StageData data, Clock::time_point epoch,
              const StageModelFactory& make_model = make_cpu_stage_model);

  int rank() const { return rank_; }
  bool holds_model_stage(int model_stage) const;

  /// Starts a step. REQUIRES: the previous plan has finished.
  void begin(const StepPlan& plan);
  /// Checks and stores a message for the current plan; throws ProtocolError.
  void accept(PipeMessage message);
  /// Runs every action that can run now, in order; returns when the next one waits
  /// for a message or the list is done.
  void run_ready(const Outbox& outbox);
  bool active() const { return plan_.has_value(); }
  bool finished() const;
  /// The report of the finished plan; ends the plan.
  StageReport take_report();

  /// Every chunk's AdamW step; with sharded optimizer state then the weights' all-gather.
  /// Returns how long that all-gather took in ms (0 without one).
  double optimizer_step(const AdamWConfig& config, double lr, float grad_scale);
  /// A skipped step (fault.on_nan skip): every chunk drops its gradients, no update.
  void discard_gradients();
  /// Parameter handles by model stage, for the final weights file.
  WeightsReply weights() const;
  /// Host copies of every chunk's parameters and optimizer state under global names
  /// (StageModel::capture_state), for a checkpoint or a snapshot. REQUIRES: no plan is
  /// running (a step boundary). Throws std::logic_error when a chunk's model cannot be
  /// captured.
  std::vector<NamedTensor> capture_state() const;
  /// AdamW's step count (every chunk steps together).
  std::int64_t optimizer_steps() const;
  /// Loads `tensors` (capture_state() of this or another stage layout) into every chunk,
  /// with AdamW step count `optimizer_steps`. REQUIRES: no plan is running. Throws
  /// StateMismatch (kernels/model/param_state.hpp) before changing a chunk.
  void restore_state(const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps);

  /// Every chunk's StageModel::snapshot(), in chunk order. REQUIRES: no plan is running.
  std::vector<std::shared_ptr<const StateSnapshot>> snapshot() const;
  /// Restores what snapshot() returned (of this rank, maybe of a worker that died).
  /// REQUIRES: no plan is running; one snapshot per chunk.
  void restore_snapshot(const std::vector<std::shared_ptr<const StateSnapshot>>& chunks);

  /// A recovery: drops the current plan, every message held or still to come of a round
  /// up to `round_fence` (they are silently ignored), the stashed activations and the
  /// gradients accumulated; the next plan must be round_fence + 1.
  void abort(std::int64_t round_fence);
  /// True for a round an abort() voided (its messages and channel failures are stale).
  bool aborted(std::int64_t round) const { return round <= round_fence_; }

  /// Each chunk's device clock (null for a CPU model), by chunk: for the trace probe.
  std::vector<DeviceActionClock*> device_clocks();

  /// REQUIRES: `listener` outlives the worker (or is reset to nullptr first).
  void set_listener(ActionListener* listener) { listener_ = listener; }
  /// fault.inject slow: asked for extra time before each compute action (null: none).
  void set_fault(std::shared_ptr<MessageFault> fault) { fault_ = std::move(fault); }

  /// Data parallelism: the group of this stage's replicas, built with
  /// replica_bucket_layout(). The gradients of every train plan are then averaged across
  /// it, each bucket as soon as the chunk's last backward has made it final
  /// (actors/worker/replica_gradients.hpp), and take_report() waits for them before it
  /// squares them, so the report holds the averaged gradients' squares and what the
  /// averaging cost. Without a group (one replica) nothing is averaged. The previous group
  /// is left first: its pending buckets settled, then destroyed; null only leaves it (a
  /// recovery, before the stage joins the next generation). `shard_optimizer_state`
  /// (optim.shard_state, ZeRO-1): the chunks keep the AdamW state of the group's rank's
  /// part only, and optimizer_step() all-gathers the updated weights.
  void set_replica_group(std::unique_ptr<GradientAllReduce> group,
                         bool shard_optimizer_state = false);
  /// The bucket layout of this stage's chunks (ReplicaGradients::layout_of).
  BucketLayout replica_bucket_layout() const;

  /// model.tie_embeddings, for a stage holding a copy of the tied tensor: `group` is the
  /// sum group with the other holder, null when this stage holds both
  /// (actors/worker/tied_embeddings.hpp). The gradients of every train plan are summed in
  /// take_report(), after the replica averaging; the head copy's square is reported as 0
  /// (the norm counts the tied tensor once).
  void set_tied_embeddings(std::unique_ptr<GradientAllReduce> group);
  /// Leaves the sum group (a recovery; the stage sets a group of the next generation
  /// before its next train plan). A stage holding both copies keeps its in-place sum.
  void leave_tied_group();
  /// Whether this stage holds copies of the tied tensor, and whether exactly one (a group
  /// is then needed); the group's layout.
  bool holds_tied_copy() const;
  bool tied_needs_group() const;
  BucketLayout tied_bucket_layout() const;

  /// Stashed activations now held (micro-batches with forward done, backward pending).
  std::size_t stashed() const { return stash_.size(); }

 private:
  struct Chunk {
    int model_stage;
    std::unique_ptr<StageModel> model;
  };
  using Key = std::pair<int, int>;  // (model stage, micro-batch)

  Chunk& chunk(int index);
  std::vector<StageModel*> models() const;
  void run(const sched::Action& action, const Outbox& outbox);
  void forward(const sched::Action& a, Chunk& c, const Outbox& outbox);
  void backward(const sched::Action& a, Chunk& c, const Outbox& outbox);
  bool ready(const sched::Action& a) const;
  const sched::Action* pending_consumer(const PipeMessage& m) const;
  void check_and_store(PipeMessage m);
  MicroBatch batch_for(int micro_batch) const;
  std::string where() const;
  /// What every backward scales the loss gradient by: a mean over this replica's
  /// micro-batches of the step (the replicas' gradients are then averaged); in a job
  /// shrunk to fewer replicas, over one configured replica's share (gradient_shares.hpp).
  /// The one place it is computed; the models get it when they are made
  /// (StageModelFactory).
  float loss_scale() const {
    return 1.0f / static_cast<float>(data_.micro_batches / data_.gradient_shares);
  }
  /// Whether the shares are gathered over the stage group (StageData::replica_shares).
  bool gathers_shares() const { return data_.replica_shares.size() > 1; }
  /// After the action at slot next_ ran: ends a gradient share there, or combines them.
  void after_weight_action(const sched::Action& a);

  GptConfig model_;
  int rank_;
  int model_stages_;
  StageData data_;
  Clock::time_point epoch_;
  std::vector<Chunk> chunks_;
  std::unique_ptr<TensorChannel> channel_;  // brings received tensors onto this device

  std::optional<StepPlan> plan_;
  std::int64_t last_round_ = 0;
  std::int64_t round_fence_ = 0;  // messages of rounds up to this one belong to aborted plans
  std::size_t next_ = 0;
  // Messages for the next plan that arrived before it (a neighbour may get its plan
  // and send before ours is delivered); checked when that plan begins.
  std::vector<PipeMessage> early_;
  std::map<Key, PipeMessage> activations_;  // arrived, not yet consumed
  std::map<Key, PipeMessage> gradients_;
  std::map<Key, std::unique_ptr<StageStash>> stash_;
  StageReport report_;
  // Losses a model reads back later (StageForward::pending_loss), by their index in
  // report_.losses: resolved by take_report, dropped by abort.
  std::vector<std::pair<std::size_t, std::function<double()>>> pending_losses_;
  ActionListener* listener_ = nullptr;
  std::shared_ptr<MessageFault> fault_;
  std::unique_ptr<ReplicaGradients> replicas_;
  std::unique_ptr<TiedEmbeddings> tied_;
  // Train plans with replicas: by chunk, the slot of its last weight-gradient action (B or W).
  std::vector<std::size_t> last_weight_action_;
  // data_.gradient_shares > 1 (a shrunk job): the shares kept, and for a train plan where
  // each chunk's shares end (empty otherwise).
  std::unique_ptr<ShareGradients> shares_;
  std::vector<ChunkShareEnds> share_ends_;
};

}  // namespace conveyor
