#pragma once
// What a stage actor computes with, whatever the device: one model chunk (a StageSlice)
// with its optimizer state. The CPU implementation wraps GptStage + AdamW; the CUDA one
// keeps everything in device memory. The stage logic above it never sees the device.
//
// Contract (same as GptStage): backward() == backward_input() then backward_weight();
// weight gradients accumulate in call order until optimizer_step() consumes and zeroes
// them; tensors handed in are never written and may be kept by handle until the
// micro-batch's backward is done (so a caller must not write them after handing them in:
// the runtime hands every activation and gradient over exactly once); tensors handed out
// are fresh.
#include <functional>
#include <memory>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/action_clock.hpp"
#include "kernels/model/gradient_buckets.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/state_snapshot.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {

class StageModel {
 public:
  virtual ~StageModel() = default;

  virtual StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash) = 0;
  virtual Tensor backward(StageStash& stash, const Tensor& grad_output, float loss_scale) = 0;
  virtual Tensor backward_input(StageStash& stash, const Tensor& grad_output,
                                float loss_scale) = 0;
  virtual void backward_weight(StageStash& stash) = 0;

  /// Sum of squared gradients per parameter, in parameter order (for the global norm).
  virtual std::vector<double> grad_squares() const = 0;
  /// Handles to the accumulated weight gradients, in parameter order: written in place when
  /// a stage's gradients are averaged across its data-parallel replicas (issue 9). The
  /// default throws std::logic_error: a model whose gradients cannot be reached that way.
  virtual std::vector<Tensor> gradients();
  /// The weight gradients as the buckets of the replica group (gradient_buckets.hpp), in
  /// a fixed order. Default: one bucket of the gradients() tensors.
  virtual std::vector<GradientSpans> gradient_buckets();
  /// Arms `on_final` for the next backward() or backward_weight() only: it is called with
  /// every bucket's index once, as that bucket becomes final, in an order fixed by the
  /// call (backward_weight: bucket order; a fused backward: the reverse). A model that
  /// cannot say ignores it (the default): the caller then treats every bucket it was not
  /// told of as final once that call returned.
  virtual void notify_final_buckets(BucketFinal on_final);
  /// model.tie_embeddings: the gradients of the tied copies this chunk holds (none, one,
  /// or both when one chunk has the embedding and the head), in parameter order. Summed
  /// with the other copy after the step's backward (actors/worker/tied_embeddings.hpp).
  /// Default: none (a model without tied copies).
  virtual std::vector<TiedGradient> tied_gradients() { return {}; }
  /// The CUDA stream (a cudaStream_t) the model's kernels run on, so a reducer can order
  /// itself after them; null for a model that computes inside its calls (the CPU).
  virtual void* compute_stream() const { return nullptr; }
  /// Returns once everything the model queued has run (a no-op on the CPU).
  virtual void synchronize() const {}
  /// ZeRO-1 (optim.shard_state, kernels/optim/optimizer_shard.hpp): from now on the
  /// optimizer keeps moments for, and updates, only replica `rank` of `ranks`'s range of
  /// the flattened parameters; after each optimizer_step() the caller all-gathers
  /// parameter_spans() across the replicas. Moments already there are cut to the range.
  /// `ranks` 1 keeps everything. The default throws std::logic_error: a model that cannot
  /// shard its optimizer state.
  virtual void shard_optimizer_state(int rank, int ranks);
  /// The parameters as spans of the model's own memory, in parameter order: what the
  /// ZeRO-1 all-gather writes. The default throws std::logic_error.
  virtual std::vector<GradientSpan> parameter_spans();
  /// AdamW on every parameter (grads scaled by grad_scale first), then zero the grads.
  virtual void optimizer_step(const AdamWConfig& config, double lr, float grad_scale) = 0;
  /// Zero the grads without an update (a skipped step): parameters, moments and the AdamW
  /// step count stay as they are.
  virtual void discard_gradients() = 0;
  /// Current parameters as host tensors with stage-independent names, in parameter order.
  virtual std::vector<NamedTensor> weights() const = 0;
  /// Training state for checkpoints and in-memory snapshots (stage restarts): host copies,
  /// which the caller may keep while training goes on, under the global names of
  /// state_names.hpp: every parameter (f32), then opt.m.<p> / opt.v.<p> (f32) once the
  /// optimizer has stepped. REQUIRES: between steps (no gradients pending). The default
  /// throws std::logic_error: a model that cannot be captured.
  virtual std::vector<NamedTensor> capture_state() const;
  /// AdamW steps taken (the bias correction's t); 0 by default.
  virtual std::int64_t optimizer_steps() const { return 0; }
  /// Sets the parameters and the optimizer state from `tensors` (as capture_state() names
  /// them; names of other stages are ignored) with AdamW step count `optimizer_steps`, and
  /// zeroes the gradients. Bitwise: restoring what capture_state() returned continues
  /// exactly as the captured model would. Throws StateMismatch (param_state.hpp) naming a
  /// missing or misshapen tensor before changing anything; the default throws
  /// std::logic_error.
  virtual void restore_state(const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps);
  /// The same state as capture_state(), kept in the model's cheapest form (state_snapshot.hpp)
  /// for a restore in memory. A GPU model returns before the copy to the host is done (it
  /// completes in the background, before the next optimizer step changes the state).
  /// Default: capture_state() as named tensors.
  virtual std::shared_ptr<const StateSnapshot> snapshot() const;
  /// Restores `snapshot` (taken by this or any model of the same slice): bitwise the state
  /// it was taken from; gradients zeroed. Default: restore_state(snapshot.tensors(), ...).
  virtual void restore_snapshot(const StateSnapshot& snapshot);
  /// The device's own times for actions (tracing a GPU stage); null where the host clock
  /// around each call is already the truth (the CPU). Made on first use; owned by the model.
  virtual DeviceActionClock* action_clock() { return nullptr; }
};

/// Builds the model of one chunk; chosen by device when the job is built. `loss_scale`
/// is the one every backward of the model will be called with (the stage worker's
/// 1 / micro-batches of its replica, decided there once): a model that forms the loss
/// gradient in its forward (the CUDA head) needs it up front.
using StageModelFactory = std::function<std::unique_ptr<StageModel>(
    const GptConfig&, const StageSlice&, std::uint64_t seed, Device device, float loss_scale)>;

/// The CPU reference: GptStage and fp32 AdamW in host memory. It takes the loss scale at
/// each backward, so `loss_scale` is not kept.
/// REQUIRES: device is the CPU.
std::unique_ptr<StageModel> make_cpu_stage_model(const GptConfig& config, const StageSlice& slice,
                                                 std::uint64_t seed, Device device = Device::cpu(),
                                                 float loss_scale = 1.0f);

}  // namespace conveyor
