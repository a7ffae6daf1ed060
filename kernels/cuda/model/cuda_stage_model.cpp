// CudaStageModel: GptStage's computation on one GPU (see cuda_stage_model.hpp), as a
// skeleton over an architecture's layers (model.arch: gpt2_cuda_layers.hpp or
// llama_cuda_layers.hpp), as the CPU's GptStage composes gpt2_layers / llama_layers. The
// skeleton owns what every architecture shares: the parameters, the stash and its phases,
// the residual stream between blocks (a block's output is handed to the next block as a
// residual pair, added by the kernel that reads it next, and materialised after the
// stage's last block by residual_forward), the LM head and its loss, the split and fused
// backward with their weight-gradient stream, the data-parallel buckets, snapshots and
// errors. An architecture supplies its BlockActs, the embedding, each block's halves
// (forward, recompute, input and weight gradients) and the final norm; a third family is a
// third such class and one line in make_cuda_stage_model.
//
// On the embedding slice a full backward() frees each block's activations (and the head's
// logits) as soon as that block's weight gradients have read them — queued on a stream of
// their own (weight_grad_stream.hpp), so the compute stream frees a half once it has joined
// it: those extra activations are held for about one block at a time. The head keeps its
// input and the final norm's output (2C), the logits (V bf16, overwritten by their
// gradient) and d_lnf (C). StageStash::bytes() reports what is held.
//
// Host syncs: only the loss readback at the end of a head slice's forward, unless the caller
// defers it (CudaStageOptions::defer_loss_readback; the weight-gradient stream is joined on
// the device).
#include "kernels/cuda/model/cuda_stage_model.hpp"

#include <array>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/copy.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/model/cuda_action_clock.hpp"
#include "kernels/cuda/model/cuda_layer_context.hpp"
#include "kernels/cuda/model/deferred_release.hpp"
#include "kernels/cuda/model/gpt2_cuda_layers.hpp"
#include "kernels/cuda/model/llama_cuda_layers.hpp"
#include "kernels/model/block_params.hpp"
#include "kernels/model/recompute.hpp"
#include "kernels/model/stash_phase.hpp"
#include "kernels/cuda/model/host_staging.hpp"
#include "kernels/cuda/model/loss_readback.hpp"
#include "kernels/cuda/model/param_store.hpp"
#include "kernels/cuda/model/residual.hpp"
#include "kernels/cuda/model/weight_grad_stream.hpp"
#include "kernels/cuda/owned_stream.hpp"

namespace conveyor {
namespace {


// One micro-batch's stash, of an architecture's blocks. Every tensor in it was allocated on
// the owner's compute stream, so it may be released at any time (the allocator orders reuse
// on that stream).
template <class BlockActs>
struct CudaStash final : StageStash {
  CudaStash(const void* owner_model, std::int64_t batch, std::int64_t seq, int num_blocks)
      : owner(owner_model), B(batch), T(seq), blocks(static_cast<std::size_t>(num_blocks)) {}

  std::size_t bytes() const override { return stash_bytes(*this); }
  void release() { release_stash(*this); }

  const void* owner;  // the CudaStageModel that made it
  std::int64_t B, T;
  StashPhase phase = StashPhase::forward_done;
  Tensor tokens;   // (B, T) i32 on the device, on the embedding slice
  Tensor d_embed;  // (B, T, C) bf16 gradient of the embedding output
  std::vector<BlockActs> blocks;
  CudaHeadActs head;
};

// What cuda_stage_gradients reads of any architecture's model.
class CudaStageModelBase : public StageModel {
 public:
  virtual std::vector<NamedTensor> gradients() const = 0;
  virtual StageLogits logits(const Tensor& input, const Tensor& targets) = 0;
};

// Deferred loss readbacks a head slice holds at a time (loss_readback.hpp).
constexpr int kLossSlots = 256;

bool is_oom(const CudaError& e) {
  return dynamic_cast<const CudaOutOfMemory*>(&e) != nullptr ||
         e.error().find("cudaErrorMemoryAllocation") != std::string::npos;
}

void validate(const GptConfig& c, const StageSlice& s, const CudaStageOptions& o) {
  const std::string who = "make_cuda_stage_model (" + describe_slice(s) + "): ";
  // Before the device check, so that it is reported (and testable) without a GPU.
  if (const auto problem = half_cut_problem(s)) throw std::invalid_argument(who + *problem);
  if (!cuda_device_available(o.device))
    throw std::invalid_argument(who + "cuda:" + std::to_string(o.device) +
                                " is not available (no GPU, no such device, or no driver)");
  if (c.d_model % 8 != 0)
    throw std::invalid_argument(who + "d_model " + std::to_string(c.d_model) +
                                " must be a multiple of 8 (tensor-core GEMMs)");
  if (s.has_head && c.vocab % 8 != 0)
    throw std::invalid_argument(who + "vocab " + std::to_string(c.vocab) +
                                " must be a multiple of 8 on the head slice (pad the vocabulary)");
  if (o.fp8 && s.num_blocks > 0) {
    // FP8 GEMMs read 16-byte rows (fp8_gemm.hpp); the rows of a micro-batch are checked
    // by the GEMM itself, with the shape in its message.
    const std::int64_t hidden = c.arch == ModelArch::llama ? c.llama_ffn_dim() : c.mlp_hidden();
    if (c.d_model % 16 != 0 || hidden % 16 != 0)
      throw std::invalid_argument(who + "precision.matmul fp8 needs d_model (" +
                                  std::to_string(c.d_model) + ") and the MLP's width (" +
                                  std::to_string(hidden) + ") to be multiples of 16");
  }
  if (s.num_blocks > 0 && c.heads > 0 && c.d_model % c.heads == 0 && c.head_dim() != 64 &&
      c.head_dim() != 128)
    throw std::invalid_argument(who + "head_dim d_model / heads = " +
                                std::to_string(c.head_dim()) +
                                " must be 64 or 128 for the CUDA attention kernels");
}

template <class Arch>
class CudaStageModel final : public CudaStageModelBase {
  using BlockActs = typename Arch::BlockActs;
  using Stash = CudaStash<BlockActs>;

 public:
  CudaStageModel(const GptConfig& config, const StageSlice& slice, std::uint64_t seed,
                 const CudaStageOptions& options)
      : config_(config),
        slice_(slice),
        options_(options),
        device_(options.device),
        stream_(options.device),
        wgrad_(options.device),
        release_(stream_.get(), options.device),
        staging_(stream_.get(), options.device) {
    DeviceGuard guard(device_);
    try {
      // The CPU reference builds (and validates) the parameters: the same names, order,
      // decay flags and bits by construction. Its host copies are dropped at once.
      GptStage host(config, slice, seed);
      params_ = std::make_unique<ParamStore>(host.params(), options.master_fp32, device_,
                                             stream_.get(), options.grads_bf16);
      linears_ = std::make_unique<StageLinears>(*params_, device_, stream_.get(), options.fp8);
      ctx_ = CudaLayerContext{config, slice, device_, stream_.get(), params_.get(),
                              stage_part_firsts<typename Arch::CpuLayers>(config, slice),
                              linears_.get()};
      layers_.emplace(ctx_);
      // Deferred: enough for a step's micro-batches on the head and an evaluation's (the
      // worker resolves them at its report); past that a forward reads its loss at once.
      if (slice.has_head)
        losses_ = LossReadback::create(device_, options.defer_loss_readback ? kLossSlots : 0);
    } catch (const CudaError& e) {
      rethrow_with_context(e, "construction");
    }
  }

  ~CudaStageModel() override {
    // Everything queued must finish before the members below return their blocks to the
    // free list of a stream that is about to be destroyed.
    try {
      DeviceGuard guard(device_);
      (void)cudaStreamSynchronize(stream());
      release_.drain();
    } catch (...) {
    }
  }

  StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash) override {
    return guarded("forward", [&] { return forward_impl(input, targets, keep_stash); });
  }

  StageLogits logits(const Tensor& input, const Tensor& targets) override {
    if (!slice_.has_head)
      throw std::invalid_argument("cuda_stage_logits: stage " + describe_slice(slice_) +
                                  " has no head, so no logits");
    return guarded("logits", [&] {
      StageLogits out;
      StageForward f = forward_impl(input, targets, /*keep_stash=*/false, &out.logits);
      out.loss = f.pending_loss ? f.pending_loss() : f.loss;
      return out;
    });
  }

  // The full backward of one micro-batch (1F1B, GPipe). On the embedding slice — it hands
  // no gradient upstream, and it holds the most micro-batches in flight — each block's
  // weight gradients come right after its input gradient and its activations are released
  // then, so the input-gradient intermediates of every block are never held at once. Other
  // slices run backward_input then backward_weight, so that their input gradient is ready
  // (and sent upstream) before the weight-gradient kernels: it is on the critical path.
  // Each parameter gets one += per micro-batch either way: the bits are the same.
  Tensor backward(StageStash& stash, const Tensor& grad_output, float loss_scale) override {
    if (!slice_.has_embedding) {
      Tensor dx = backward_input(stash, grad_output, loss_scale);
      backward_weight(stash);
      return dx;
    }
    return guarded("backward", [&] {
      Stash& st = own(stash, StashPhase::forward_done, "backward");
      const BucketFinal on_final = std::exchange(on_final_, nullptr);
      if (params_->grads_bf16())
        backward_fused<bf16>(st, grad_output, loss_scale, on_final);
      else
        backward_fused<float>(st, grad_output, loss_scale, on_final);
      return Tensor{};
    });
  }

  Tensor backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale) override {
    return guarded("backward_input",
                   [&] { return backward_input_impl(stash, grad_output, loss_scale); });
  }

  void backward_weight(StageStash& stash) override {
    guarded("backward_weight", [&] { backward_weight_impl(stash); });
  }

  std::vector<double> grad_squares() const override {
    DeviceGuard guard(device_);
    return params_->grad_squares();
  }

  void optimizer_step(const AdamWConfig& config, double lr, float grad_scale) override {
    DeviceGuard guard(device_);
    params_->step(config, lr, grad_scale);
  }

  void discard_gradients() override {
    DeviceGuard guard(device_);
    params_->discard_grads();
  }

  std::vector<NamedTensor> weights() const override {
    DeviceGuard guard(device_);
    return params_->weights();
  }

  std::vector<NamedTensor> gradients() const override {
    DeviceGuard guard(device_);
    return params_->gradients();
  }

  // Data-parallel buckets: the embedding, each block (the halves held), the head (as
  // present), in the order backward_weight adds to them; each one contiguous span of the
  // flat gradient buffer. (block_bucket and head_bucket number them; the embedding's is 0.)
  std::vector<GradientSpans> gradient_buckets() override {
    const StagePartFirsts& f = ctx_.firsts;
    std::vector<GradientSpans> out;
    if (slice_.has_embedding) {
      const std::size_t end = slice_.num_blocks > 0 ? f.block_begin(0)
                              : slice_.has_head     ? f.head
                                                    : f.end;
      out.push_back({params_->grad_span(f.embedding, end)});
    }
    for (int j = 0; j < slice_.num_blocks; ++j)
      out.push_back({params_->grad_span(f.block_begin(j), f.block_end(j))});
    if (slice_.has_head) out.push_back({params_->grad_span(f.head, params_->size())});
    return out;
  }

  std::vector<TiedGradient> tied_gradients() override {
    if (!config_.tie_embeddings) return {};
    return find_tied_gradients(
        params_->size(), [&](std::size_t i) -> const std::string& { return params_->name(i); },
        [&](std::size_t i) { return params_->grad_span(i, i + 1); });
  }

  void notify_final_buckets(BucketFinal on_final) override { on_final_ = std::move(on_final); }

  void* compute_stream() const override { return stream(); }

  void synchronize() const override {
    DeviceGuard guard(device_);
    CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

  // Training state (stage_model.hpp, state_names.hpp): the ParamStore's flat buffers, read
  // after everything queued on the compute stream. Between steps only: a pending
  // backward_weight would still add to the gradients, which restore_state zeroes.
  std::vector<NamedTensor> capture_state() const override {
    DeviceGuard guard(device_);
    return params_->capture_state();
  }

  std::int64_t optimizer_steps() const override { return params_->steps(); }

  void restore_state(const std::vector<NamedTensor>& tensors,
                     std::int64_t optimizer_steps) override {
    guarded("restore_state", [&] { params_->restore_state(tensors, optimizer_steps); });
  }

  // In-memory snapshots: pinned copies made in the background (param_store.hpp).
  std::shared_ptr<const StateSnapshot> snapshot() const override {
    DeviceGuard guard(device_);
    return params_->snapshot();
  }

  void restore_snapshot(const StateSnapshot& snapshot) override {
    guarded("restore_snapshot", [&] { params_->restore_snapshot(snapshot); });
  }

  DeviceActionClock* action_clock() override {
    if (!clock_) clock_ = std::make_unique<CudaActionClock>(device_, stream_.get());
    return clock_.get();
  }

 private:
  // ---- plumbing

  // Makes the device current, frees finished inputs, and names the stage in CUDA errors.
  template <class F>
  std::invoke_result_t<F&> guarded(const char* method, F&& body) {
    DeviceGuard guard(device_);
    try {
      release_.collect();
      return body();
    } catch (const CudaError& e) {
      rethrow_with_context(e, method);
    }
  }

  [[noreturn]] void rethrow_with_context(const CudaError& e, const char* method) const {
    const std::string where = "stage " + describe_slice(slice_) + " on cuda:" +
                              std::to_string(device_) + ", " + method + ": ";
    if (!is_oom(e)) throw;
    const std::string advice =
        ". Reduce pipeline.micro_batch_size, use more pipeline.stages, or model.recompute";
    if (const auto* oom = dynamic_cast<const CudaOutOfMemory*>(&e))
      throw CudaOutOfMemory(where + oom->what() + advice, oom->requested(), oom->free_bytes());
    throw CudaError(e.file().c_str(), e.line(), e.call(),
                    e.error() + " (" + where + "out of memory" + advice + ")");
  }

  cudaStream_t stream() const { return stream_.get(); }

  Tensor alloc(Shape shape, DType dtype, const char* what) const {
    return empty_cuda(std::move(shape), dtype, device_, stream(), what);
  }
  Tensor zeros(Shape shape, DType dtype, const char* what) const {
    return zeros_cuda(std::move(shape), dtype, device_, stream(), what);
  }
  // A copy on the compute stream. REQUIRES: wait_ready(src, stream()) already queued.
  Tensor copy_of(const Tensor& src, const char* what) const {
    Tensor dst = alloc(src.shape(), src.dtype(), what);
    copy_tensor(dst, src, stream());
    return dst;
  }

  // Indices of gradient_buckets(): the embedding's is 0 when the slice has it.
  std::size_t block_bucket(int j) const {
    return (slice_.has_embedding ? 1 : 0) + static_cast<std::size_t>(j);
  }
  std::size_t head_bucket() const { return block_bucket(slice_.num_blocks); }
  bool has_attention(int j) const { return ctx_.has_attention(j); }
  bool has_mlp(int j) const { return ctx_.has_mlp(j); }
  // lm_head.weight, after the architecture's final norm.
  std::size_t lm_head() const { return ctx_.firsts.head + Arch::kLmHead; }
  const bf16* w(std::size_t i) const { return params_->value(i); }
  // Parameter i's gradient as G (float or bf16: the store's gradient type).
  template <class G>
  G* g(std::size_t i) const {
    return params_->template grad<G>(i);
  }

  // ---- argument checks (std::invalid_argument naming what was expected and got)

  std::pair<std::int64_t, std::int64_t> check_input(const Tensor& input) const {
    const std::string seq = "1 <= T <= " + std::to_string(config_.seq_len);
    const auto& d = input.shape().dims();
    if (slice_.has_embedding) {
      if (!input.defined() || !input.device().is_cpu() || input.dtype() != DType::i32 ||
          d.size() != 2 || d[0] < 1 || d[1] < 1 || d[1] > config_.seq_len)
        throw std::invalid_argument(
            "CudaStageModel::forward: input must be i32 (B, T) token ids on cpu with " + seq +
            ", got " + input.describe());
      check_ids(input, "token id");
    } else {
      const Device here = Device::cuda(device_);
      if (!input.defined() || input.device() != here || input.dtype() != DType::bf16 ||
          d.size() != 3 || d[0] < 1 || d[1] < 1 || d[1] > config_.seq_len ||
          d[2] != config_.d_model)
        throw std::invalid_argument("CudaStageModel::forward: input must be bf16 (B, T, " +
                                    std::to_string(config_.d_model) + ") on " + here.str() +
                                    " with " + seq + ", got " + input.describe());
    }
    return {d[0], d[1]};
  }

  void check_ids(const Tensor& ids, const char* what) const {
    const std::int32_t* p = ids.i32();
    for (std::int64_t i = 0; i < ids.numel(); ++i)
      if (p[i] < 0 || p[i] >= config_.vocab)
        throw std::invalid_argument(std::string("CudaStageModel::forward: ") + what + " " +
                                    std::to_string(p[i]) + " at flat position " +
                                    std::to_string(i) + " is outside the vocabulary [0, " +
                                    std::to_string(config_.vocab) + ")");
  }

  void check_targets(const Tensor& targets, std::int64_t B, std::int64_t T) const {
    if (!targets.defined() || !targets.device().is_cpu() || targets.dtype() != DType::i32 ||
        targets.shape() != Shape{B, T})
      throw std::invalid_argument("CudaStageModel::forward: targets must be i32 " +
                                  Shape{B, T}.str() + " on cpu, got " + targets.describe());
    check_ids(targets, "target");
  }

  void check_grad_output(const Tensor& grad, std::int64_t B, std::int64_t T) const {
    const Shape want{B, T, config_.d_model};
    const Device here = Device::cuda(device_);
    if (!grad.defined() || grad.device() != here || grad.dtype() != DType::bf16 ||
        grad.shape() != want)
      throw std::invalid_argument("CudaStageModel::backward: grad_output must be bf16 " +
                                  want.str() + " on " + here.str() + ", got " + grad.describe());
  }

  Stash& own(StageStash& stash, StashPhase want, const char* who) const {
    return own_stash<Stash>(stash, this, want, std::string("CudaStageModel::") + who);
  }

  // ---- forward

  // `logits_out`: when given (a head slice's evaluation), the logits copied to the host as
  // f32 (a host sync).
  StageForward forward_impl(const Tensor& input, const Tensor& targets, bool keep_stash,
                            Tensor* logits_out = nullptr) {
    const auto [B, T] = check_input(input);
    if (slice_.has_head) check_targets(targets, B, T);
    const std::int64_t C = config_.d_model;

    auto stash = keep_stash ? std::make_unique<Stash>(this, B, T, slice_.num_blocks) : nullptr;
    // The residual stream is `x`, or res_a + res_b when res_a is defined (a block's or an
    // attention half's output, formed by the kernel that reads it next).
    Tensor x, res_a, res_b;
    if (slice_.has_embedding) {
      Tensor tokens = staging_.upload(input, "token ids (B, T)");
      x = layers_->embedding_forward(tokens, B, T);
      if (stash) stash->tokens = std::move(tokens);
    } else {
      wait_ready(input, stream());
      // The stash owns a copy made on this stream (the caller may reuse its tensor); the
      // caller's tensor itself is held below until the stream has read it.
      x = keep_stash ? copy_of(input, "stage input copy (B, T, C)") : input;
    }

    for (int j = 0; j < slice_.num_blocks; ++j) {
      BlockActs scratch;
      BlockActs& a = stash ? stash->blocks[static_cast<std::size_t>(j)] : scratch;
      auto [out_a, out_b] = block_forward(j, x, res_a, res_b, a, B, T);
      x = {};
      res_a = std::move(out_a);
      res_b = std::move(out_b);
      layers_->drop_recomputed(j, a);
    }

    StageForward result;
    if (slice_.has_head) {
      CudaHeadActs scratch;
      CudaHeadActs& h = stash ? stash->head : scratch;
      head_forward(x, res_a, res_b, targets, h, stash != nullptr, B, T, result);
      if (logits_out) *logits_out = to_f32_host(to_host(h.logits, stream()));
    } else if (res_a.defined()) {
      Tensor out = alloc({B, T, C}, DType::bf16, "stage output activation (B, T, C)");
      residual_forward(bf(out), bf(res_a), bf(res_b), B * T * C, stream());
      record_ready(out, stream());
      result.activation = std::move(out);
    } else {
      // An embedding-only slice: the embedding output is fresh and not stashed.
      record_ready(x, stream());
      result.activation = std::move(x);
    }
    // After every launch that reads it (the copy, or the whole forward without a stash).
    if (!slice_.has_embedding) release_.hold(input);
    result.stash = std::move(stash);
    return result;
  }

  // Block j's forward (the halves the slice holds); its input is `x`, or res_a + res_b when
  // res_a is defined (fused into the block's first norm). Fills `a` and returns the block's
  // output as a residual pair: (a.res2, the MLP's output), or (a.x, the attention's output)
  // for a lone attention half (its res2).
  std::pair<Tensor, Tensor> block_forward(int j, const Tensor& x, const Tensor& res_a,
                                          const Tensor& res_b, BlockActs& a, std::int64_t B,
                                          std::int64_t T) {
    if (has_attention(j)) {
      if (!res_a.defined()) a.x = x;
      layers_->attention_half(j, a, res_a, res_b, B, T);
      if (!has_mlp(j)) return {a.x, layers_->attention_out(j, a, B, T)};
    } else {
      a.res2 = x;  // a lone MLP half starts the slice: its input is the block's res2
    }
    layers_->mlp_half(j, a, B, T);
    return {a.res2, layers_->mlp_out(j, a, B, T)};
  }

  // model.recompute: before a block's backward, what forward dropped of the halves held
  // (Arch::drop_recomputed) — the same kernels on the same a.x (or a lone MLP half's
  // a.res2), so the same bits.
  void recompute(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    if (recomputes_attention(config_.recompute) && has_attention(j))
      layers_->attention_half(j, a, {}, {}, B, T);
    if (recomputes_mlp(config_.recompute) && has_mlp(j)) layers_->mlp_half(j, a, B, T);
  }

  // The final norm (the architecture's, fused with the last block's residual add when res_a
  // is defined), the LM head and the mean cross-entropy, into out.loss (read back now) or
  // out.pending_loss (deferred, loss_readback.hpp). Training with a known head loss scale:
  // dlogits in place over the logits in the same launch.
  void head_forward(const Tensor& x, const Tensor& res_a, const Tensor& res_b,
                    const Tensor& targets, CudaHeadActs& h, bool training, std::int64_t B,
                    std::int64_t T, StageForward& out) {
    const std::int64_t C = config_.d_model, V = config_.vocab;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), v = static_cast<int>(V);
    h.targets = staging_.upload(targets, "targets (B, T)");
    layers_->final_norm_forward(h, x, res_a, res_b, B, T);
    h.logits = alloc({B, T, V}, DType::bf16, "logits (B, T, V)");
    linear_forward(bf(h.logits), nullptr, bf(h.lnf), w(lm_head()), nullptr, n, c, v, stream());
    Tensor losses = alloc({B * T}, DType::f32, "per-token losses (B * T)");
    if (training && options_.head_loss_scale) h.dlogits_scale = *options_.head_loss_scale;
    cross_entropy_forward_backward(f32(losses), h.dlogits_scale ? bf(h.logits) : nullptr,
                                   bf(h.logits), i32(h.targets),
                                   h.dlogits_scale.value_or(0.0f) / static_cast<float>(n), n, v,
                                   stream());
    // The kernel writes the mean straight into pinned host memory: no copy-engine
    // transfer, so this readback never queues behind a snapshot's device-to-host copies
    // (ParamStore::snapshot), which would stall the stage's thread and its GPU.
    if (const auto slot = losses_->acquire()) {
      mean_loss(losses_->device_slot(*slot), f32(losses), n, stream());
      out.loss = std::numeric_limits<double>::quiet_NaN();
      out.pending_loss = losses_->pending(*slot, stream());
      return;
    }
    // Without deferral, or every slot pending: the one host sync of a micro-batch.
    mean_loss(losses_->immediate_slot(), f32(losses), n, stream());
    out.loss = losses_->read_now(stream());
  }

  // ---- backward

  // The gradient of the stage output as this stream's own tensor: handed in (checked,
  // copied, the caller's kept until read), or the head's (loss and LM head).
  Tensor output_gradient(Stash& st, const Tensor& grad_output, float loss_scale) {
    if (slice_.has_head) return head_backward_input(st.head, loss_scale, st.B, st.T);
    check_grad_output(grad_output, st.B, st.T);
    wait_ready(grad_output, stream());
    Tensor d = copy_of(grad_output, "stage output gradient copy (B, T, C)");
    release_.hold(grad_output);
    return d;
  }

  // REQUIRES: the embedding slice (it hands out no input gradient: returns nothing).
  // Without data-parallel buckets to name, each half's weight gradients go to their own
  // stream (weight_grad_stream.hpp) as soon as its input gradient is queued: a block's MLP
  // half's beside its attention half's input gradient, the attention half's (and the
  // head's) beside the next block's MLP half. The compute stream joins a half before it
  // frees what that half read, so beyond the one-stream order the stage holds only the
  // attention half's 8C per token of the block behind (and, with the head, its logits)
  // during one MLP half. With buckets, everything stays on the compute stream, where the
  // all-reduce's events expect each bucket's last +=.
  template <class G>
  void backward_fused(Stash& st, const Tensor& grad_output, float loss_scale,
                      const BucketFinal& on_final) {
    const std::int64_t B = st.B, T = st.T;
    auto final = [&](std::size_t bucket) {
      if (on_final) on_final(bucket);
    };
    const bool side = !on_final;
    const cudaStream_t ws = side ? wgrad_.get() : stream();
    // Queues `launch` on ws after what the compute stream has written; returns its mark.
    auto queue_weight_grads = [&](auto&& launch) {
      if (side) wgrad_.fork(stream());
      launch();
      return side ? wgrad_.mark() : 0;
    };
    auto join = [&](int mark) {
      if (side) wgrad_.join(stream(), mark);
    };
    // The last half whose weight gradients may still be reading its activations.
    struct Behind {
      int mark = 0;
      BlockActs block;
      CudaHeadActs head;
    };
    std::optional<Behind> behind;
    // Keeps what a half's weight gradients read until its mark is joined; with one stream,
    // drops it at once (the temporaries here): nothing to wait for.
    auto hold = [&](int mark, BlockActs block, CudaHeadActs head) {
      if (side) behind.emplace(Behind{mark, std::move(block), std::move(head)});
    };
    auto release_behind = [&] {
      if (!behind) return;
      join(behind->mark);
      behind.reset();  // freed in compute-stream order, after the join
    };
    Tensor d = output_gradient(st, grad_output, loss_scale);  // (B, T, C)
    if (slice_.has_head) {
      const int m = queue_weight_grads([&] { head_backward_weight<G>(st.head, B, T, ws); });
      final(head_bucket());
      hold(m, {}, std::exchange(st.head, {}));
    }
    for (int j = slice_.num_blocks - 1; j >= 0; --j) {
      BlockActs& a = st.blocks[static_cast<std::size_t>(j)];
      recompute(j, a, B, T);
      int last = 0;
      Tensor d_res2 = d;  // a lone attention half's output is res2
      if (has_mlp(j)) {
        d_res2 = layers_->mlp_half_backward_input(j, a, d, B, T);
        last = queue_weight_grads(
            [&] { layers_->template mlp_half_backward_weight<G>(j, a, B, T, ws); });
      }
      release_behind();
      if (has_attention(j)) {
        d = layers_->attention_half_backward_input(j, a, d_res2, B, T);
        if (has_mlp(j)) {
          join(last);
          a.release_mlp_half();
        }
        last = queue_weight_grads(
            [&] { layers_->template attention_half_backward_weight<G>(j, a, B, T, ws); });
      } else {
        d = d_res2;
      }
      final(block_bucket(j));
      hold(last, std::exchange(a, {}), {});
    }
    join(queue_weight_grads(
        [&] { layers_->template embedding_backward_weight<G>(d, st.tokens, B, T, ws); }));
    final(0);
    behind.reset();  // the join above follows every queued weight gradient
    st.release();
    st.phase = StashPhase::weight_done;
  }

  Tensor backward_input_impl(StageStash& stash, const Tensor& grad_output, float loss_scale) {
    Stash& st = own(stash, StashPhase::forward_done, "backward_input");
    const std::int64_t B = st.B, T = st.T;
    Tensor d = output_gradient(st, grad_output, loss_scale);  // (B, T, C) of the residual stream
    for (int j = slice_.num_blocks - 1; j >= 0; --j)
      d = block_backward_input(j, st.blocks[static_cast<std::size_t>(j)], d, B, T);
    st.phase = StashPhase::input_done;
    if (slice_.has_embedding) {
      st.d_embed = std::move(d);
      return {};
    }
    record_ready(d, stream());
    return d;
  }

  // Returns the gradient of the block input (fresh) from d_out, that of the block output
  // (a lone attention half's output is res2); keeps in `a` what block_backward_weight needs.
  Tensor block_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                              std::int64_t T) {
    recompute(j, a, B, T);
    Tensor d_res2 = has_mlp(j) ? layers_->mlp_half_backward_input(j, a, d_out, B, T) : d_out;
    // A lone MLP half's input is res2.
    return has_attention(j) ? layers_->attention_half_backward_input(j, a, d_res2, B, T)
                            : d_res2;
  }

  Tensor head_backward_input(CudaHeadActs& h, float loss_scale, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config_.d_model, V = config_.vocab;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), v = static_cast<int>(V);
    if (h.dlogits_scale) {
      if (*h.dlogits_scale != loss_scale)
        throw std::logic_error("backward of the head slice with loss_scale " +
                               std::to_string(loss_scale) +
                               ", but forward formed d(loss)/d(logits) with head_loss_scale " +
                               std::to_string(*h.dlogits_scale));
    } else {
      // The logits become their gradient in place; the losses are recomputed and unused.
      Tensor losses = alloc({B * T}, DType::f32, "per-token losses (B * T)");
      cross_entropy_forward_backward(f32(losses), bf(h.logits), bf(h.logits), i32(h.targets),
                                     loss_scale / static_cast<float>(n), n, v, stream());
    }
    h.d_lnf = alloc({B, T, C}, DType::bf16, "d final norm output (B, T, C)");
    linear_backward_input(bf(h.d_lnf), bf(h.logits), w(lm_head()), nullptr, n, c, v, stream());
    return layers_->final_norm_backward_input(h, B, T);
  }

  void backward_weight_impl(StageStash& stash) {
    Stash& st = own(stash, StashPhase::input_done, "backward_weight");
    // Armed by notify_final_buckets for this call only: names each bucket (gradient_buckets
    // order) once its last += is queued.
    const BucketFinal on_final = std::exchange(on_final_, nullptr);
    if (params_->grads_bf16())
      accumulate_weight_grads<bf16>(st, on_final);
    else
      accumulate_weight_grads<float>(st, on_final);
    // Every tensor of the stash was allocated on this stream: releasing them now is
    // ordered after the launches above by the allocator.
    st.release();
    st.phase = StashPhase::weight_done;
  }

  // Every weight gradient's += of one micro-batch; G is the gradients' type (the launchers
  // are overloaded on it).
  template <class G>
  void accumulate_weight_grads(const Stash& st, const BucketFinal& on_final) {
    const std::int64_t B = st.B, T = st.T;
    auto final = [&](std::size_t bucket) {
      if (on_final) on_final(bucket);
    };
    if (slice_.has_embedding) {
      layers_->template embedding_backward_weight<G>(st.d_embed, st.tokens, B, T, stream());
      final(0);
    }
    for (int j = 0; j < slice_.num_blocks; ++j) {
      block_backward_weight<G>(j, st.blocks[static_cast<std::size_t>(j)], B, T, stream());
      final(block_bucket(j));
    }
    if (slice_.has_head) {
      head_backward_weight<G>(st.head, B, T, stream());
      final(head_bucket());
    }
  }

  // The weight gradients of the halves of block j the slice holds.
  template <class G>
  void block_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                             cudaStream_t s) {
    if (has_mlp(j)) layers_->template mlp_half_backward_weight<G>(j, a, B, T, s);
    if (has_attention(j)) layers_->template attention_half_backward_weight<G>(j, a, B, T, s);
  }

  template <class G>
  void head_backward_weight(const CudaHeadActs& h, std::int64_t B, std::int64_t T,
                            cudaStream_t s) {
    const int n = static_cast<int>(B * T), c = static_cast<int>(config_.d_model),
              v = static_cast<int>(config_.vocab);
    linear_backward_weight(g<G>(lm_head()), static_cast<G*>(nullptr), bf(h.logits), bf(h.lnf), n,
                           c, v, s);
    layers_->template final_norm_backward_weight<G>(h, B, T, s);
  }

  // ---- state (declaration order is destruction order reversed: the stream goes last)

  GptConfig config_;
  StageSlice slice_;
  CudaStageOptions options_;
  int device_;
  OwnedStream stream_;              // the compute stream
  WeightGradStream wgrad_;          // the fused backward's weight gradients
  DeferredRelease release_;         // handed-in tensors still read by the stream
  HostStaging staging_;             // pinned buffers for token ids and targets
  std::unique_ptr<ParamStore> params_;
  std::unique_ptr<StageLinears> linears_;  // the blocks' GEMMs, over params_
  CudaLayerContext ctx_;            // what the layers share; points at params_ and linears_
  std::optional<Arch> layers_;      // the architecture's, over ctx_
  std::shared_ptr<LossReadback> losses_;  // the head slice's loss readbacks
  std::unique_ptr<CudaActionClock> clock_;  // device times of actions, when traced
  BucketFinal on_final_;  // armed for the next backward_weight (data parallelism)
};

}  // namespace

std::string describe_slice(const StageSlice& s) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : " + ") + part; };
  if (s.has_embedding) add("embedding");
  // A lone half at either end is named on its own: "block 4.mlp + blocks 5..8".
  const int whole_begin = s.first_block + (s.starts_at_mlp ? 1 : 0);
  const int whole_end = s.end_block() - (s.ends_after_attention ? 1 : 0);
  if (s.starts_at_mlp && s.holds_mlp(s.first_block))
    add("block " + std::to_string(s.first_block) + ".mlp");
  if (whole_end > whole_begin)
    add("blocks " + std::to_string(whole_begin) + ".." + std::to_string(whole_end));
  if (s.ends_after_attention && s.holds_attention(whole_end))
    add("block " + std::to_string(whole_end) + ".attention");
  if (s.has_head) add("head");
  return out.empty() ? "empty slice" : out;
}

StageLogits cuda_stage_logits(StageModel& model, const Tensor& input, const Tensor& targets) {
  auto* cuda = dynamic_cast<CudaStageModelBase*>(&model);
  if (!cuda)
    throw std::invalid_argument("cuda_stage_logits: the model was not made by make_cuda_stage_model");
  return cuda->logits(input, targets);
}

std::vector<NamedTensor> cuda_stage_gradients(const StageModel& model) {
  const auto* cuda = dynamic_cast<const CudaStageModelBase*>(&model);
  if (!cuda)
    throw std::invalid_argument("cuda_stage_gradients: the model was not made by make_cuda_stage_model");
  return cuda->gradients();
}

bool cuda_device_available(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return device >= 0 && device < count;
}

std::unique_ptr<StageModel> make_cuda_stage_model(const GptConfig& config, const StageSlice& slice,
                                                  std::uint64_t seed,
                                                  const CudaStageOptions& options) {
  validate(config, slice, options);
  set_attention_backend(options.attention);
  switch (config.arch) {
    case ModelArch::gpt2:
      return std::make_unique<CudaStageModel<cuda_gpt2::Layers>>(config, slice, seed, options);
    case ModelArch::llama:
      return std::make_unique<CudaStageModel<cuda_llama::Layers>>(config, slice, seed, options);
  }
  throw std::invalid_argument("make_cuda_stage_model: unknown model.arch");
}

}  // namespace conveyor
