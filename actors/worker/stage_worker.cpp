#include "actors/worker/stage_worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "actors/worker/nvtx_range.hpp"
#include "actors/worker/replica_gradients.hpp"
#include "actors/fault/message_fault.hpp"

namespace conveyor {
namespace {

std::int64_t since(StageWorker::Clock::time_point epoch) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(StageWorker::Clock::now() - epoch)
      .count();
}

bool is_backward_input(sched::ActionKind k) {
  return k == sched::ActionKind::B || k == sched::ActionKind::I;
}

}  // namespace

StageWorker::StageWorker(const GptConfig& model, const RankPlacement& placement,
                         int model_stages, StageData data, Clock::time_point epoch,
                         const StageModelFactory& make_model)
    : model_(model),
      rank_(placement.rank),
      model_stages_(model_stages),
      data_(std::move(data)),
      epoch_(epoch),
      channel_(make_in_process_channel(placement.device)) {
  for (const auto& c : placement.chunks)
    chunks_.push_back(Chunk{c.model_stage,
                            make_model(model, c.slice, data_.seed, placement.device, loss_scale())});
  if (data_.gradient_shares > 1 || gathers_shares()) {
    share_of(0, data_.micro_batches, data_.gradient_shares);  // the shares divide the step
    shares_ = std::make_unique<ShareGradients>(data_.gradient_shares, models());
  }
}

bool StageWorker::holds_model_stage(int model_stage) const {
  for (const auto& c : chunks_)
    if (c.model_stage == model_stage) return true;
  return false;
}

std::vector<DeviceActionClock*> StageWorker::device_clocks() {
  std::vector<DeviceActionClock*> clocks;
  for (auto& c : chunks_) clocks.push_back(c.model->action_clock());
  return clocks;
}

StageWorker::Chunk& StageWorker::chunk(int index) {
  if (index < 0 || index >= static_cast<int>(chunks_.size()))
    throw ProtocolError(fmt::format("{}: the plan names chunk {}, this stage holds {}", where(),
                                    index, chunks_.size()));
  return chunks_[index];
}

std::string StageWorker::where() const {
  if (!plan_) return fmt::format("stage {}", rank_);
  return fmt::format("stage {} ({} step {})", rank_, phase_name(plan_->phase), plan_->step);
}

void StageWorker::begin(const StepPlan& plan) {
  if (plan_) throw ProtocolError(fmt::format("{}: got a plan for step {} before finishing", where(),
                                             plan.step));
  if (!plan.actions) throw ProtocolError(fmt::format("stage {}: plan without actions", rank_));
  if (plan.round != last_round_ + 1)
    throw ProtocolError(fmt::format("stage {}: plan round {} after round {}", rank_, plan.round,
                                    last_round_));
  std::vector<ChunkShareEnds> ends;
  if (shares_ && plan.phase == Phase::train) try {
      ends = share_ends(*plan.actions, static_cast<int>(chunks_.size()), data_.micro_batches,
                        shares_->shares());
    } catch (const std::invalid_argument& e) {
      throw ProtocolError(fmt::format("stage {} step {}: {}", rank_, plan.step, e.what()));
    }
  share_ends_ = std::move(ends);
  plan_ = plan;
  next_ = 0;
  report_ = StageReport{};
  report_.rank = rank_;
  report_.round = plan.round;
  report_.step = plan.step;
  report_.phase = plan.phase;
  last_weight_action_.assign(chunks_.size(), plan.actions->size());
  if (replicas_ && plan.phase == Phase::train) {
    const auto& actions = *plan.actions;
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const auto& a = actions[i];
      if ((a.kind == sched::ActionKind::B || a.kind == sched::ActionKind::W) && a.chunk >= 0 &&
          a.chunk < static_cast<int>(chunks_.size()))
        last_weight_action_[static_cast<std::size_t>(a.chunk)] = i;
    }
  }
  auto early = std::move(early_);
  early_.clear();
  for (auto& m : early) check_and_store(std::move(m));
}

std::vector<StageModel*> StageWorker::models() const {
  std::vector<StageModel*> out;
  for (const auto& c : chunks_) out.push_back(c.model.get());
  return out;
}

void StageWorker::set_replica_group(std::unique_ptr<GradientAllReduce> group,
                                    bool shard_optimizer_state) {
  replicas_.reset();
  if (!group) return;
  replicas_ =
      std::make_unique<ReplicaGradients>(std::move(group), models(), shard_optimizer_state);
}

BucketLayout StageWorker::replica_bucket_layout() const {
  return ReplicaGradients::layout_of(models());
}

void StageWorker::set_tied_embeddings(std::unique_ptr<GradientAllReduce> group) {
  tied_ = std::make_unique<TiedEmbeddings>(models(), std::move(group));
}

void StageWorker::leave_tied_group() {
  if (tied_ && tied_needs_group()) tied_.reset();
}

bool StageWorker::holds_tied_copy() const { return !TiedEmbeddings::layout_of(models()).empty(); }

bool StageWorker::tied_needs_group() const { return TiedEmbeddings::needs_group(models()); }

BucketLayout StageWorker::tied_bucket_layout() const { return TiedEmbeddings::layout_of(models()); }

const sched::Action* StageWorker::pending_consumer(const PipeMessage& m) const {
  const auto& actions = *plan_->actions;
  for (std::size_t i = next_; i < actions.size(); ++i) {
    const auto& a = actions[i];
    if (a.micro_batch != m.micro_batch || a.chunk < 0 ||
        a.chunk >= static_cast<int>(chunks_.size()) ||
        chunks_[a.chunk].model_stage != m.to_model_stage)
      continue;
    if (m.kind == PipeKind::activation && a.kind == sched::ActionKind::F) return &a;
    if (m.kind == PipeKind::gradient && is_backward_input(a.kind)) return &a;
  }
  return nullptr;
}

void StageWorker::accept(PipeMessage m) {
  if (m.round <= round_fence_) return;  // sent before a recovery aborted its round
  const std::int64_t next_round = (plan_ ? plan_->round : last_round_) + 1;
  if (m.round == next_round) {  // for the plan after this one: hold it until then
    early_.push_back(std::move(m));
    return;
  }
  if (!plan_ || m.round != plan_->round)
    throw ProtocolError(fmt::format(
        "{}: {} for {} step {} micro-batch {} from model stage {} does not belong to the "
        "current plan",
        where(), pipe_kind_name(m.kind), phase_name(m.phase), m.step, m.micro_batch,
        m.from_model_stage));
  check_and_store(std::move(m));
}

void StageWorker::check_and_store(PipeMessage m) {
  const auto what = fmt::format("{} for step {} micro-batch {} to model stage {}",
                                pipe_kind_name(m.kind), m.step, m.micro_batch, m.to_model_stage);
  if (!holds_model_stage(m.to_model_stage))
    throw ProtocolError(fmt::format("{}: {}: this stage does not hold that model stage", where(),
                                    what));
  if (m.step != plan_->step || m.phase != plan_->phase)
    throw ProtocolError(fmt::format("{}: {} is for {} step {}", where(), what,
                                    phase_name(m.phase), m.step));
  if (!pending_consumer(m))
    throw ProtocolError(fmt::format("{}: {}: no pending {} action of this plan consumes it",
                                    where(), what,
                                    m.kind == PipeKind::activation ? "F" : "B or I"));
  const Shape expected{data_.micro_batch_size, model_.seq_len, model_.d_model};
  if (m.tensor.dtype() != data_.activation_dtype || m.tensor.shape() != expected)
    throw ProtocolError(fmt::format("{}: {}: expected {} {}, got {}", where(), what,
                                    dtype_name(data_.activation_dtype), expected.str(),
                                    m.tensor.describe()));
  auto& box = m.kind == PipeKind::activation ? activations_ : gradients_;
  Key key{m.to_model_stage, m.micro_batch};
  if (box.count(key))
    throw ProtocolError(fmt::format("{}: {} arrived twice", where(), what));
  box.emplace(key, std::move(m));
}

bool StageWorker::ready(const sched::Action& a) const {
  if (a.chunk < 0 || a.chunk >= static_cast<int>(chunks_.size())) return true;  // run() reports it
  const int ms = chunks_[a.chunk].model_stage;
  const Key key{ms, a.micro_batch};
  switch (a.kind) {
    case sched::ActionKind::F:
      return ms == 0 || activations_.count(key) > 0;
    case sched::ActionKind::B:
    case sched::ActionKind::I:
      return ms == model_stages_ - 1 || gradients_.count(key) > 0;
    default:
      return true;
  }
}

bool StageWorker::finished() const { return plan_ && next_ == plan_->actions->size(); }

void StageWorker::run_ready(const Outbox& outbox) {
  if (!plan_) return;
  const auto& actions = *plan_->actions;
  while (next_ < actions.size() && ready(actions[next_])) {
    const auto& a = actions[next_];
    if (listener_) listener_->action_started(*plan_, next_);
    const auto start = since(epoch_);
    {
      const NvtxRange range(a, plan_->step);
      // Data parallelism: the chunk's buckets start as its last backward makes them final.
      const bool last_weight = a.chunk >= 0 && a.chunk < static_cast<int>(chunks_.size()) &&
                               last_weight_action_[static_cast<std::size_t>(a.chunk)] == next_;
      // Gradient shares: the buckets are final only once the shares are combined; shares
      // gathered over the group (several replicas of a shrunk job) replace its average.
      const bool sharing = !share_ends_.empty();
      const bool averaging = last_weight && !gathers_shares();
      if (averaging && !sharing) replicas_->arm(static_cast<std::size_t>(a.chunk));
      run(a, outbox);
      if (sharing) after_weight_action(a);
      if (averaging) {
        if (sharing) replicas_->arm(static_cast<std::size_t>(a.chunk));
        replicas_->after_last_backward(static_cast<std::size_t>(a.chunk));
      }
    }
    report_.timings.push_back(ActionTiming{a, start, since(epoch_)});
    if (listener_) listener_->action_finished(*plan_, next_, report_.timings.back());
    ++next_;
  }
}

void StageWorker::after_weight_action(const sched::Action& a) {
  if (a.kind != sched::ActionKind::B && a.kind != sched::ActionKind::W) return;
  const auto chunk = static_cast<std::size_t>(a.chunk);  // run() checked it
  const auto& ends = share_ends_.at(chunk).ends;
  for (std::size_t s = 0; s < ends.size(); ++s) {
    if (ends[s] != next_) continue;
    if (s + 1 < ends.size()) {
      shares_->end_share(chunk);
    } else if (!gathers_shares()) {
      shares_->combine(chunk);
    }  // else gathered with the other replicas' by take_report
  }
}

MicroBatch StageWorker::batch_for(int micro_batch) const {
  const bool train = plan_->phase == Phase::train;
  SampleKey key{data_.seed, train ? plan_->step : 0,
                train ? data_.first_micro_batch + micro_batch : micro_batch, train ? 0u : 1u};
  return sample_micro_batch(*data_.corpus, train ? data_.splits.train : data_.splits.val, key,
                            data_.micro_batch_size, model_.seq_len);
}

void StageWorker::run(const sched::Action& a, const Outbox& outbox) {
  Chunk& c = chunk(a.chunk);
  // fault.inject slow: inside the action's timing, so it counts as busy time.
  if (fault_ && (a.kind == sched::ActionKind::F || a.kind == sched::ActionKind::B ||
                 a.kind == sched::ActionKind::I || a.kind == sched::ActionKind::W))
    if (const auto d = fault_->action_delay(rank_, plan_->step, plan_->phase); d.count() > 0)
      std::this_thread::sleep_for(d);
  switch (a.kind) {
    case sched::ActionKind::F:
      forward(a, c, outbox);
      break;
    case sched::ActionKind::B:
    case sched::ActionKind::I:
    case sched::ActionKind::W:
      backward(a, c, outbox);
      break;
    default:
      break;  // communication is implicit: outputs are sent as soon as they exist
  }
}

void StageWorker::forward(const sched::Action& a, Chunk& c, const Outbox& outbox) {
  const int ms = c.model_stage;
  const Key key{ms, a.micro_batch};
  const bool first = ms == 0, last = ms == model_stages_ - 1;
  const bool train = plan_->phase == Phase::train;
  if (train && stash_.count(key))
    throw ProtocolError(fmt::format("{}: forward of micro-batch {} ran twice", where(),
                                    a.micro_batch));
  MicroBatch batch;
  if (first || last) batch = batch_for(a.micro_batch);
  Tensor input;
  if (first) {
    input = batch.tokens;
  } else {
    auto it = activations_.find(key);
    input = channel_->receive(it->second.tensor);
    activations_.erase(it);
  }
  StageForward out = c.model->forward(input, last ? batch.targets : Tensor{}, train);
  if (train) stash_.emplace(key, std::move(out.stash));
  if (last) {
    // Keyed by the step's global micro-batch: the coordinator averages every replica's.
    report_.losses.emplace_back(train ? data_.first_micro_batch + a.micro_batch : a.micro_batch,
                                out.loss);
    if (out.pending_loss)
      pending_losses_.emplace_back(report_.losses.size() - 1, std::move(out.pending_loss));
  } else {
    outbox(PipeMessage{PipeKind::activation, plan_->round, plan_->step, plan_->phase,
                       a.micro_batch, ms, ms + 1, std::move(out.activation)});
  }
}

void StageWorker::backward(const sched::Action& a, Chunk& c, const Outbox& outbox) {
  const int ms = c.model_stage;
  const Key key{ms, a.micro_batch};
  auto stashed = stash_.find(key);
  if (plan_->phase != Phase::train || stashed == stash_.end())
    throw ProtocolError(fmt::format("{}: {} before its forward", where(), a.str()));
  if (a.kind == sched::ActionKind::W) {
    c.model->backward_weight(*stashed->second);
    stash_.erase(stashed);
    return;
  }
  Tensor grad_output;
  if (ms != model_stages_ - 1) {
    auto it = gradients_.find(key);
    grad_output = channel_->receive(it->second.tensor);
    gradients_.erase(it);
  }
  Tensor grad_input;
  if (a.kind == sched::ActionKind::B) {
    grad_input = c.model->backward(*stashed->second, grad_output, loss_scale());
    stash_.erase(stashed);
  } else {
    grad_input = c.model->backward_input(*stashed->second, grad_output, loss_scale());
  }
  if (ms > 0)
    outbox(PipeMessage{PipeKind::gradient, plan_->round, plan_->step, plan_->phase,
                       a.micro_batch, ms, ms - 1, std::move(grad_input)});
}

StageReport StageWorker::take_report() {
  if (!finished()) throw std::logic_error(where() + ": report taken before the plan finished");
  if (!stash_.empty() || !activations_.empty() || !gradients_.empty())
    throw ProtocolError(fmt::format(
        "{}: plan finished with {} stashed activations and {} unconsumed messages", where(),
        stash_.size(), activations_.size() + gradients_.size()));
  if (plan_->phase == Phase::train) {
    if (gathers_shares()) {
      if (!replicas_)
        throw ProtocolError(where() + ": its gradient shares are to be gathered, but it is in no stage group");
      double ms = 0.0;  // blocking, after the compute: all of it exposed
      for (std::size_t c = 0; c < chunks_.size(); ++c)
        ms += shares_->gather_and_combine(c, replicas_->group(), data_.replica_shares);
      report_.allreduce_busy_ms = ms;
      report_.allreduce_exposed_ms = ms;
    } else if (replicas_) {
      const ReductionTiming timing = replicas_->finish();
      report_.allreduce_busy_ms = timing.busy_ms;
      report_.allreduce_exposed_ms = timing.exposed_ms;
    }
    if (tied_) tied_->sum();
    for (const auto& c : chunks_) {
      report_.grad_squares.push_back(ModelStageGradSquares{c.model_stage, c.model->grad_squares()});
    }
    if (tied_)  // the tied tensor counts once in the norm: the embedding's copy stands for it
      for (const auto& [chunk, param] : tied_->head_square_params())
        report_.grad_squares.at(chunk).squares.at(param) = 0.0;
  }
  // After the norms, which waited for the device: reading the losses waits for nothing.
  for (auto& [index, loss] : pending_losses_) report_.losses[index].second = loss();
  pending_losses_.clear();
  last_round_ = plan_->round;
  plan_.reset();
  return std::move(report_);
}

void StageWorker::discard_gradients() {
  if (shares_) shares_->clear();
  for (auto& c : chunks_) c.model->discard_gradients();
}

double StageWorker::optimizer_step(const AdamWConfig& config, double lr, float grad_scale) {
  for (auto& c : chunks_) c.model->optimizer_step(config, lr, grad_scale);
  // ZeRO-1: each replica updated its part of the weights; every replica needs them all.
  if (replicas_ && replicas_->shards_optimizer_state()) return replicas_->gather_parameters();
  return 0.0;
}

WeightsReply StageWorker::weights() const {
  WeightsReply reply;
  reply.rank = rank_;
  for (const auto& c : chunks_)
    reply.model_stages.push_back(ModelStageWeights{c.model_stage, c.model->weights()});
  return reply;
}

std::vector<NamedTensor> StageWorker::capture_state() const {
  if (plan_)
    throw std::logic_error(where() + ": state captured in the middle of a plan");
  std::vector<NamedTensor> out;
  for (const auto& c : chunks_) {
    auto tensors = c.model->capture_state();
    out.insert(out.end(), std::make_move_iterator(tensors.begin()),
               std::make_move_iterator(tensors.end()));
  }
  return out;
}

std::int64_t StageWorker::optimizer_steps() const {
  return chunks_.empty() ? 0 : chunks_.front().model->optimizer_steps();
}

void StageWorker::restore_state(const std::vector<NamedTensor>& tensors,
                                std::int64_t optimizer_steps) {
  if (plan_) throw std::logic_error(where() + ": state restored in the middle of a plan");
  for (auto& c : chunks_) c.model->restore_state(tensors, optimizer_steps);
}

std::vector<std::shared_ptr<const StateSnapshot>> StageWorker::snapshot() const {
  if (plan_) throw std::logic_error(where() + ": snapshot taken in the middle of a plan");
  std::vector<std::shared_ptr<const StateSnapshot>> out;
  for (const auto& c : chunks_) out.push_back(c.model->snapshot());
  return out;
}

void StageWorker::restore_snapshot(const std::vector<std::shared_ptr<const StateSnapshot>>& chunks) {
  if (plan_) throw std::logic_error(where() + ": snapshot restored in the middle of a plan");
  if (chunks.size() != chunks_.size())
    throw std::logic_error(fmt::format("stage {}: a snapshot of {} chunks for {} chunks", rank_,
                                       chunks.size(), chunks_.size()));
  for (std::size_t i = 0; i < chunks_.size(); ++i) chunks_[i].model->restore_snapshot(*chunks[i]);
}

void StageWorker::abort(std::int64_t round_fence) {
  plan_.reset();
  next_ = 0;
  early_.clear();
  activations_.clear();
  gradients_.clear();
  stash_.clear();
  report_ = StageReport{};
  pending_losses_.clear();
  last_round_ = std::max(last_round_, round_fence);
  round_fence_ = std::max(round_fence_, round_fence);
  share_ends_.clear();
  if (shares_) shares_->clear();
  for (auto& c : chunks_) c.model->discard_gradients();
}

}  // namespace conveyor
