#pragma once
// StageModel on one CUDA device: one GPT chunk (a StageSlice) with its AdamW state, the
// same parameters (names, order, decay flags, initial values) as GptStage, computed in bf16
// with fp32 accumulation by the launchers of kernels/cuda.
//
// Tensors at the interface:
//   forward input     i32 (B, T) tokens on the host when the slice has the embedding,
//                     else bf16 (B, T, C) on this model's device
//   forward targets   i32 (B, T) on the host (head slice only)
//   activation out    bf16 (B, T, C) on this device, fresh (empty on the head slice)
//   loss              mean cross-entropy, read back to the host (one float per micro-batch:
//                     the only host sync in forward/backward), or handed out as
//                     StageForward::pending_loss when defer_loss_readback is set
//   grad_output in    bf16 (B, T, C) on this device (ignored on the head slice, where
//                     d(loss)/d(logit) is scaled by loss_scale / (B * T) as on the CPU)
//   input grad out    bf16 (B, T, C) on this device, fresh (empty on the embedding slice)
//   weights()         host f32 tensors (the fp32 master, or the bf16 weights widened)
//   weight gradients  f32 or bf16 on the device (CudaStageOptions::grads_bf16), never
//                     handed out but by cuda_stage_gradients (host f32)
//   capture_state()   host f32 tensors named as the CPU model's (param_store.hpp): the
//                     weights as weights(), then opt.m / opt.v (bf16 moments widened)
//   restore_state()   the inverse, from a GPU or CPU capture (bf16 recipe: narrowed, RNE)
//
// Ordering without host syncs: every model owns a non-blocking compute stream on its
// device. It calls wait_ready(t, stream) (device_storage.hpp) on every device tensor it is
// handed, and record_ready(t, stream) on every tensor it hands out, so a consumer on another
// stream or GPU orders itself on the tensor's ready event. Handed-in device tensors are
// kept alive until the compute stream has finished reading them (DeferredRelease), so the
// producer's allocator cannot reuse them early. Tensors handed out were allocated on the
// compute stream: a consumer on another stream must likewise keep them until its reads are
// complete (or synchronise) before dropping its last handle.
//
// Errors: CUDA failures throw CudaError; running out of device memory throws
// CudaOutOfMemory (or CudaError) whose message names the stage slice, the method, what was
// being allocated, and what to change in the configuration.
//
// Threading: every method may be called from any one thread at a time (the stage actor's);
// each makes the model's device current for its duration and restores the previous one.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/fp8_recipe.hpp"
#include "kernels/model/stage_model.hpp"

namespace conveyor {

struct CudaStageOptions {
  int device = 0;
  /// optim.master: true = fp32 master weights and fp32 AdamW moments with a bf16 compute
  /// copy; false = weights and moments in bf16 only (as the PyTorch reference).
  bool master_fp32 = true;
  /// Bitwise reproducible runs. Every launcher used is deterministic today, so this has
  /// no effect yet; it is where faster non-deterministic kernels would be switched off.
  bool deterministic = true;
  /// optim.grad_dtype: false = weight gradients accumulated in f32; true = in bf16 (fp32
  /// sums rounded once per launch and element, as PyTorch's all-bf16 recipe): half the
  /// gradient memory. Either master recipe.
  bool grads_bf16 = false;
  /// runtime.attention: which attention implementation runs (attention.hpp). It is
  /// process-wide: make_cuda_stage_model sets it, so every model of a process should agree.
  AttentionBackend attention = AttentionBackend::cudnn;
  /// precision.matmul fp8: the blocks' linear layers in FP8 (stage_linears.hpp); unset:
  /// bf16. REQUIRES with it: d_model, the MLP's width and the rows of a micro-batch (B·T)
  /// multiples of 16.
  std::optional<Fp8Recipe> fp8;
  /// The loss_scale every backward of the head slice will be called with (the runtime's
  /// 1 / micro_batches), when known: a training forward then writes d(loss)/d(logits) over
  /// the logits in the same pass that forms the loss (one read of the (B, T, V) logits
  /// instead of two launches; the bits of the backward's own pass). A backward with
  /// another loss_scale then throws std::logic_error. Unset: the backward forms it.
  std::optional<float> head_loss_scale;
  /// A head slice's forward returns its loss as StageForward::pending_loss (read once the
  /// caller asks, loss_readback.hpp) instead of waiting for the device: the stage's thread
  /// goes on queuing work. The runtime sets it; false (the default) returns `loss` itself.
  bool defer_loss_readback = false;
};

/// REQUIRES (std::invalid_argument otherwise): a valid config and slice (as GptStage),
/// d_model a multiple of 8, vocab a multiple of 8 on a head slice, head_dim 64 or 128 when
/// the slice has blocks, and cuda_device_available(options.device).
std::unique_ptr<StageModel> make_cuda_stage_model(const GptConfig& config, const StageSlice& slice,
                                                  std::uint64_t seed,
                                                  const CudaStageOptions& options);

/// The weight gradients accumulated so far, host f32 tensors in parameter order (bf16
/// gradients widened; tests and debugging; waits for the device). Throws
/// std::invalid_argument unless `model` was made by make_cuda_stage_model.
std::vector<NamedTensor> cuda_stage_gradients(const StageModel& model);

/// forward() without a stash, keeping the logits: the LM head's output (B, T, V), its bf16
/// values widened to host f32, and the loss (as StageForward::loss); waits for the device.
/// For comparing the GPU model with other implementations (`conveyor hf logits --device
/// cuda`); training never needs them. Throws std::invalid_argument as forward() does, on a
/// slice without the head, or unless `model` was made by make_cuda_stage_model.
StageLogits cuda_stage_logits(StageModel& model, const Tensor& input, const Tensor& targets);

/// True when the CUDA runtime works and `device` exists; never throws.
bool cuda_device_available(int device);

/// "embedding + blocks 0..4", "blocks 4..8 + head" (blocks [first, end)), with a lone half
/// at either end named on its own: "block 3.mlp + blocks 4..6 + block 6.attention". For
/// messages.
std::string describe_slice(const StageSlice& slice);

}  // namespace conveyor
