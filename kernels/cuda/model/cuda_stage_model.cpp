// CudaStageModel: GptStage's computation on one GPU (see cuda_stage_model.hpp).
//
// Block structure (pre-norm GPT-2), with the residual adds fused into the LayerNorm that
// follows them (residual_layernorm_forward):
//   attention half:  x_j -> ln1 -> qkv -> attention -> proj
//   MLP half:        [res2 = x_j + proj] ln2 -> fc1+GELU -> fc2
//   x_{j+1} = res2 + fc2 is formed by the next block's ln1 (or ln_f) in the same kernel;
//   after the stage's last block (no head) a residual_forward materialises it.
// A slice may begin or end between a block's halves (stage_slice.hpp): a slice ending after
// an attention half materialises res2 = x_j + proj as its output; the next one starts at
// that block's ln2, a plain LayerNorm of its input. The rounding is the same either way, so
// the losses and gradients do not depend on how the model is split into slices (bitwise,
// on one GPU model and library version).
//
// Memory of one micro-batch's stash, per block and token: after forward x, ln1, atty,
// res2, ln2 (5C bf16), qkv (3C), pre-GELU and GELU (8C), 4 floats of LayerNorm statistics
// and NH floats of attention logsumexp. backward_input frees qkv, the logsumexp and the
// pre-GELU activation and adds d_out, d_ln2, d_res2, d_ln1 (4C bf16), d_qkv (3C) and
// d_fc1 (4C); backward_weight frees everything. A lone attention half keeps x, ln1, atty,
// qkv, its statistics and logsumexp (and adds d_res2, d_ln1, d_qkv); a lone MLP half keeps
// res2, ln2, the MLP's 8C and its statistics (and adds d_out, d_ln2, d_fc1).
// On the embedding slice a full backward() frees each block's activations (and the head's
// logits) as soon as that block's weight gradients have read them — queued on a stream of
// their own (weight_grad_stream.hpp), so the compute stream frees a half once it has joined
// it: those 4C extra per block are held for about one block at a time. The head keeps its
// input and ln_f's output (2C), the logits (V bf16, overwritten by their gradient) and
// d_lnf (C).
// model.recompute (kernels/model/recompute.hpp) drops parts of a block's forward
// activations and computes them again at the start of its backward_input: `attention`
// keeps x, res2, ln2 and the MLP's 8C; `full` keeps x alone (C per token and block) — or,
// for a lone MLP half, res2, its input.
// StageStash::bytes() reports what is held.
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
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/model/cuda_action_clock.hpp"
#include "kernels/cuda/model/deferred_release.hpp"
#include "kernels/model/block_params.hpp"
#include "kernels/model/stash_phase.hpp"
#include "kernels/cuda/model/host_staging.hpp"
#include "kernels/cuda/model/loss_readback.hpp"
#include "kernels/cuda/model/param_store.hpp"
#include "kernels/cuda/model/residual.hpp"
#include "kernels/cuda/model/weight_grad_stream.hpp"
#include "kernels/cuda/owned_stream.hpp"

namespace conveyor {
namespace {


bf16* bf(Tensor& t) { return static_cast<bf16*>(t.raw()); }
const bf16* bf(const Tensor& t) { return static_cast<const bf16*>(t.raw()); }
float* f32(Tensor& t) { return static_cast<float*>(t.raw()); }
const float* f32(const Tensor& t) { return static_cast<const float*>(t.raw()); }
const std::int32_t* i32(const Tensor& t) { return static_cast<const std::int32_t*>(t.raw()); }


// What one block keeps between forward, backward_input and backward_weight (device).
struct BlockActs {
  // forward
  Tensor x;                        // (B, T, C) bf16 block input, the residual stream
  Tensor ln1, ln1_mean, ln1_rstd;  // (B, T, C) bf16, (B, T) f32, (B, T) f32
  Tensor qkv;                      // (B, T, 3C) bf16; freed by backward_input
  Tensor lse;                      // (B, NH, T) f32 attention logsumexp; freed by backward_input
  Tensor atty;                     // (B, T, C) bf16 attention output, input of attn.proj
  Tensor res2;                     // (B, T, C) bf16 x + attn.proj(atty); a lone MLP half's input
  Tensor ln2, ln2_mean, ln2_rstd;  // (B, T, C) bf16, (B, T), (B, T)
  Tensor pre_gelu;                 // (B, T, 4C) bf16 fc1 output; freed by backward_input
  Tensor gelu;                     // (B, T, 4C) bf16 input of mlp.fc2
  // backward_input, for backward_weight
  Tensor d_out;   // (B, T, C) gradient of the block output
  Tensor d_fc1;   // (B, T, 4C) gradient of the pre-GELU activation
  Tensor d_ln2;   // (B, T, C)
  Tensor d_res2;  // (B, T, C)
  Tensor d_qkv;   // (B, T, 3C)
  Tensor d_ln1;   // (B, T, C)

  // What only the MLP half's weight gradients read, once its input gradient is done.
  void release_mlp_half() {
    for (Tensor* t : {&d_out, &gelu, &d_fc1, &ln2, &ln2_mean, &ln2_rstd, &d_ln2, &res2}) *t = {};
  }

  std::array<const Tensor*, 19> all() const {
    return {&x,    &ln1,      &ln1_mean, &ln1_rstd, &qkv,   &lse,   &atty,
            &res2, &ln2,      &ln2_mean, &ln2_rstd, &pre_gelu, &gelu, &d_out,
            &d_fc1, &d_ln2,   &d_res2,   &d_qkv,    &d_ln1};
  }
};

// What the final LayerNorm, the LM head and the loss keep (device).
struct HeadActs {
  Tensor targets;                  // (B, T) i32
  Tensor x;                        // (B, T, C) bf16 input of ln_f
  Tensor lnf, lnf_mean, lnf_rstd;  // (B, T, C) bf16, (B, T), (B, T)
  Tensor logits;                   // (B, T, V) bf16: logits, then dlogits
  // The loss scale dlogits were formed with in forward (CudaStageOptions::head_loss_scale),
  // or unset: the logits are still logits and backward_input forms dlogits.
  std::optional<float> dlogits_scale;
  Tensor d_lnf;  // (B, T, C) bf16
};


// One micro-batch's stash. Every tensor in it was allocated on the owner's compute stream,
// so it may be released at any time (the allocator orders reuse on that stream).
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
  HeadActs head;
};

// Deferred loss readbacks a head slice holds at a time (loss_readback.hpp).
constexpr int kLossSlots = 256;

bool is_oom(const CudaError& e) {
  return dynamic_cast<const CudaOutOfMemory*>(&e) != nullptr ||
         e.error().find("cudaErrorMemoryAllocation") != std::string::npos;
}

void validate(const GptConfig& c, const StageSlice& s, const CudaStageOptions& o) {
  const std::string who = "make_cuda_stage_model (" + describe_slice(s) + "): ";
  if (c.arch != ModelArch::gpt2)
    throw std::invalid_argument(who + "model.arch " + std::string(model_arch_name(c.arch)) +
                                ": CPU stages only so far (this model computes GPT-2 blocks)");
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
  if (s.num_blocks > 0 && c.heads > 0 && c.d_model % c.heads == 0 && c.head_dim() != 64 &&
      c.head_dim() != 128)
    throw std::invalid_argument(who + "head_dim d_model / heads = " +
                                std::to_string(c.head_dim()) +
                                " must be 64 or 128 for the CUDA attention kernels");
}

class CudaStageModel final : public StageModel {
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
      CudaStash& st = own(stash, StashPhase::forward_done, "backward");
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

  std::vector<NamedTensor> gradients() const {
    DeviceGuard guard(device_);
    return params_->gradients();
  }

  // Data-parallel buckets: the embedding, each block (the halves held), the head (as
  // present), in the order backward_weight adds to them; each one contiguous span of the
  // flat gradient buffer. (block_bucket and head_bucket number them; the embedding's is 0.)
  std::vector<GradientSpans> gradient_buckets() override {
    std::vector<GradientSpans> out;
    if (slice_.has_embedding) out.push_back({params_->grad_span(0, block_base())});
    for (int j = 0; j < slice_.num_blocks; ++j) {
      const std::size_t begin = at(j, has_attention(j) ? ln1_w : ln2_w);
      const std::size_t end = at(j, has_mlp(j) ? fc2_b : proj_b) + 1;
      out.push_back({params_->grad_span(begin, end)});
    }
    if (slice_.has_head) out.push_back({params_->grad_span(head_base(), params_->size())});
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

  std::size_t block_base() const { return conveyor::block_base(slice_); }
  // Indices of gradient_buckets(): the embedding's is 0 when the slice has it.
  std::size_t block_bucket(int j) const {
    return (slice_.has_embedding ? 1 : 0) + static_cast<std::size_t>(j);
  }
  std::size_t head_bucket() const { return block_bucket(slice_.num_blocks); }
  // Parameter positions as GptStage's (block_params.hpp): only the halves held.
  std::size_t head_base() const { return conveyor::head_base(slice_); }
  std::size_t at(int local_block, BlockParam k) const {
    return block_param(slice_, local_block, k);
  }
  // Whether the slice holds local block j's attention / MLP half.
  bool has_attention(int j) const { return slice_.holds_attention(slice_.first_block + j); }
  bool has_mlp(int j) const { return slice_.holds_mlp(slice_.first_block + j); }
  const bf16* w(std::size_t i) const { return params_->value(i); }
  // Parameter i's gradient as G (float or bf16: the store's gradient type).
  template <class G>
  G* g(std::size_t i) const {
    return params_->grad<G>(i);
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

  CudaStash& own(StageStash& stash, StashPhase want, const char* who) const {
    return own_stash<CudaStash>(stash, this, want, std::string("CudaStageModel::") + who);
  }

  // ---- forward

  StageForward forward_impl(const Tensor& input, const Tensor& targets, bool keep_stash) {
    const auto [B, T] = check_input(input);
    if (slice_.has_head) check_targets(targets, B, T);
    const std::int64_t C = config_.d_model;

    auto stash = keep_stash ? std::make_unique<CudaStash>(this, B, T, slice_.num_blocks) : nullptr;
    // The residual stream is `x`, or res_a + res_b when res_a is defined (a block's or an
    // attention half's output, formed by the kernel that reads it next).
    Tensor x, res_a, res_b;
    if (slice_.has_embedding) {
      Tensor tokens = staging_.upload(input, "token ids (B, T)");
      x = alloc({B, T, C}, DType::bf16, "embedding output (B, T, C)");
      embedding_forward(bf(x), i32(tokens), w(0), w(1), int(B), int(T), int(C), stream());
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
      drop_recomputed(j, a);
    }

    StageForward result;
    if (slice_.has_head) {
      HeadActs scratch;
      head_forward(x, res_a, res_b, targets, stash ? stash->head : scratch, stash != nullptr, B,
                   T, result);
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
  // res_a is defined (fused into ln1). Fills `a` and returns the block's output as a
  // residual pair: (a.res2, fc2), or (a.x, proj) for a lone attention half (its res2).
  std::pair<Tensor, Tensor> block_forward(int j, const Tensor& x, const Tensor& res_a,
                                          const Tensor& res_b, BlockActs& a, std::int64_t B,
                                          std::int64_t T) {
    if (has_attention(j)) {
      if (!res_a.defined()) a.x = x;
      attention_half(j, a, res_a, res_b, B, T);
      if (!has_mlp(j)) return {a.x, attention_proj(j, a, B, T)};
    } else {
      // A lone MLP half starts the slice: its input is the block's res2, a plain tensor.
      a.res2 = x;
    }
    mlp_half(j, a, B, T);
    return {a.res2, mlp_fc2(j, a, B, T)};
  }

  // ln1, qkv and attention of block j: fills ln1 (and its statistics), qkv, lse and atty.
  // The input is a.x, or res_a + res_b when res_a is defined (then a.x is formed here, by
  // ln1's kernel: the same bits as a separate add).
  void attention_half(int j, BlockActs& a, const Tensor& res_a, const Tensor& res_b,
                      std::int64_t B, std::int64_t T) {
    const std::int64_t C = config_.d_model, NH = config_.heads;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C);
    a.ln1 = alloc({B, T, C}, DType::bf16, "ln1 output (B, T, C)");
    a.ln1_mean = alloc({B, T}, DType::f32, "ln1 mean (B, T)");
    a.ln1_rstd = alloc({B, T}, DType::f32, "ln1 rstd (B, T)");
    if (res_a.defined()) {
      a.x = alloc({B, T, C}, DType::bf16, "block input (B, T, C)");
      residual_layernorm_forward(bf(a.x), bf(a.ln1), f32(a.ln1_mean), f32(a.ln1_rstd), bf(res_a),
                                 bf(res_b), w(at(j, ln1_w)), w(at(j, ln1_b)), n, c, stream());
    } else {
      layernorm_forward(bf(a.ln1), f32(a.ln1_mean), f32(a.ln1_rstd), bf(a.x), w(at(j, ln1_w)),
                        w(at(j, ln1_b)), n, c, stream());
    }
    a.qkv = alloc({B, T, 3 * C}, DType::bf16, "attention qkv (B, T, 3C)");
    linear_forward(bf(a.qkv), nullptr, bf(a.ln1), w(at(j, qkv_w)), w(at(j, qkv_b)), n, c, 3 * c,
                   stream());
    a.lse = alloc({B, NH, T}, DType::f32, "attention logsumexp (B, NH, T)");
    a.atty = alloc({B, T, C}, DType::bf16, "attention output (B, T, C)");
    attention_forward(bf(a.atty), f32(a.lse), bf(a.qkv), int(B), int(T), c, int(NH), stream());
  }

  // attn.proj of block j from a.atty: the attention half's output is a.x + that (res2).
  // Not stashed: backward needs only its gradient, which is res2's.
  Tensor attention_proj(int j, const BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config_.d_model;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C);
    Tensor proj = alloc({B, T, C}, DType::bf16, "attention projection (B, T, C)");
    linear_forward(bf(proj), nullptr, bf(a.atty), w(at(j, proj_w)), w(at(j, proj_b)), n, c, c,
                   stream());
    return proj;
  }

  // ln2, fc1 and GELU of block j: fills ln2 (and its statistics), pre_gelu and gelu. With
  // the attention half, res2 = a.x + attn.proj(a.atty) is formed by ln2's kernel (and stored
  // in a.res2); a lone MLP half normalises a.res2, its input, with the plain LayerNorm: the
  // same bits as the fused kernel.
  void mlp_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config_.d_model, H = config_.mlp_hidden();
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), h = static_cast<int>(H);
    a.ln2 = alloc({B, T, C}, DType::bf16, "ln2 output (B, T, C)");
    a.ln2_mean = alloc({B, T}, DType::f32, "ln2 mean (B, T)");
    a.ln2_rstd = alloc({B, T}, DType::f32, "ln2 rstd (B, T)");
    if (has_attention(j)) {
      const Tensor proj = attention_proj(j, a, B, T);
      a.res2 = alloc({B, T, C}, DType::bf16, "attention residual (B, T, C)");
      residual_layernorm_forward(bf(a.res2), bf(a.ln2), f32(a.ln2_mean), f32(a.ln2_rstd), bf(a.x),
                                 bf(proj), w(at(j, ln2_w)), w(at(j, ln2_b)), n, c, stream());
    } else {
      layernorm_forward(bf(a.ln2), f32(a.ln2_mean), f32(a.ln2_rstd), bf(a.res2), w(at(j, ln2_w)),
                        w(at(j, ln2_b)), n, c, stream());
    }
    a.pre_gelu = alloc({B, T, H}, DType::bf16, "mlp pre-GELU (B, T, 4C)");
    a.gelu = alloc({B, T, H}, DType::bf16, "mlp GELU output (B, T, 4C)");
    linear_forward(bf(a.gelu), bf(a.pre_gelu), bf(a.ln2), w(at(j, fc1_w)), w(at(j, fc1_b)), n, c,
                   h, stream());
  }

  // mlp.fc2 of block j from a.gelu: the block's output is a.res2 + that. Never recomputed
  // (backward does not read it).
  Tensor mlp_fc2(int j, const BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config_.d_model, H = config_.mlp_hidden();
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), h = static_cast<int>(H);
    Tensor fc2 = alloc({B, T, C}, DType::bf16, "mlp output (B, T, C)");
    linear_forward(bf(fc2), nullptr, bf(a.gelu), w(at(j, fc2_w)), w(at(j, fc2_b)), n, h, c,
                   stream());
    return fc2;
  }

  // model.recompute: after a block's forward, what backward will compute again. Released
  // in stream order (the allocator's rule), so after the launches that read them. A lone
  // MLP half keeps res2 under `full`: it is the block's input there, as x is elsewhere.
  void drop_recomputed(int j, BlockActs& a) const {
    if (recomputes_attention(config_.recompute))
      a.ln1 = a.ln1_mean = a.ln1_rstd = a.qkv = a.lse = a.atty = Tensor{};
    if (recomputes_mlp(config_.recompute)) {
      if (has_attention(j)) a.res2 = Tensor{};
      a.ln2 = a.ln2_mean = a.ln2_rstd = a.pre_gelu = a.gelu = Tensor{};
    }
  }

  // model.recompute: before a block's backward, what forward dropped of the halves held —
  // the same kernels on the same a.x (or a lone MLP half's a.res2), so the same bits.
  void recompute(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    if (recomputes_attention(config_.recompute) && has_attention(j))
      attention_half(j, a, {}, {}, B, T);
    if (recomputes_mlp(config_.recompute) && has_mlp(j)) mlp_half(j, a, B, T);
  }

  // ln_f (fused with the last block's residual add when res_a is defined), the LM head and
  // the mean cross-entropy, into out.loss (read back now) or out.pending_loss (deferred,
  // loss_readback.hpp). Training with a known head loss scale: dlogits in place over the
  // logits in the same launch.
  void head_forward(const Tensor& x, const Tensor& res_a, const Tensor& res_b,
                    const Tensor& targets, HeadActs& h, bool training, std::int64_t B,
                    std::int64_t T, StageForward& out) {
    const std::int64_t C = config_.d_model, V = config_.vocab;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), v = static_cast<int>(V);
    const std::size_t base = head_base();
    h.targets = staging_.upload(targets, "targets (B, T)");
    h.lnf = alloc({B, T, C}, DType::bf16, "ln_f output (B, T, C)");
    h.lnf_mean = alloc({B, T}, DType::f32, "ln_f mean (B, T)");
    h.lnf_rstd = alloc({B, T}, DType::f32, "ln_f rstd (B, T)");
    if (res_a.defined()) {
      h.x = alloc({B, T, C}, DType::bf16, "ln_f input (B, T, C)");
      residual_layernorm_forward(bf(h.x), bf(h.lnf), f32(h.lnf_mean), f32(h.lnf_rstd), bf(res_a),
                                 bf(res_b), w(base), w(base + 1), n, c, stream());
    } else {
      h.x = x;
      layernorm_forward(bf(h.lnf), f32(h.lnf_mean), f32(h.lnf_rstd), bf(h.x), w(base),
                        w(base + 1), n, c, stream());
    }
    h.logits = alloc({B, T, V}, DType::bf16, "logits (B, T, V)");
    linear_forward(bf(h.logits), nullptr, bf(h.lnf), w(base + 2), nullptr, n, c, v, stream());
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
  Tensor output_gradient(CudaStash& st, const Tensor& grad_output, float loss_scale) {
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
  void backward_fused(CudaStash& st, const Tensor& grad_output, float loss_scale,
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
      HeadActs head;
    };
    std::optional<Behind> behind;
    // Keeps what a half's weight gradients read until its mark is joined; with one stream,
    // drops it at once (the temporaries here): nothing to wait for.
    auto hold = [&](int mark, BlockActs block, HeadActs head) {
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
        d_res2 = mlp_half_backward_input(j, a, d, B, T);
        last = queue_weight_grads([&] { mlp_half_backward_weight<G>(j, a, B, T, ws); });
      }
      release_behind();
      if (has_attention(j)) {
        d = attention_half_backward_input(j, a, d_res2, B, T);
        if (has_mlp(j)) {
          join(last);
          a.release_mlp_half();
        }
        last = queue_weight_grads([&] { attention_half_backward_weight<G>(j, a, B, T, ws); });
      } else {
        d = d_res2;
      }
      final(block_bucket(j));
      hold(last, std::exchange(a, {}), {});
    }
    join(queue_weight_grads([&] { embedding_backward_weight<G>(st, d, ws); }));
    final(0);
    behind.reset();  // the join above follows every queued weight gradient
    st.release();
    st.phase = StashPhase::weight_done;
  }

  Tensor backward_input_impl(StageStash& stash, const Tensor& grad_output, float loss_scale) {
    CudaStash& st = own(stash, StashPhase::forward_done, "backward_input");
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
    Tensor d_res2 = has_mlp(j) ? mlp_half_backward_input(j, a, d_out, B, T) : d_out;
    // A lone MLP half's input is res2.
    return has_attention(j) ? attention_half_backward_input(j, a, d_res2, B, T) : d_res2;
  }

  // The MLP half's input gradient: returns d_res2 (the residual's d_out plus ln2's).
  Tensor mlp_half_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                                 std::int64_t T) {
    const std::int64_t C = config_.d_model, H = config_.mlp_hidden();
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), h = static_cast<int>(H);
    a.d_out = d_out;
    a.d_fc1 = alloc({B, T, H}, DType::bf16, "d mlp pre-GELU (B, T, 4C)");
    linear_backward_input(bf(a.d_fc1), bf(d_out), w(at(j, fc2_w)), bf(a.pre_gelu), n, h, c,
                          stream());
    a.pre_gelu = {};
    a.d_ln2 = alloc({B, T, C}, DType::bf16, "d ln2 output (B, T, C)");
    linear_backward_input(bf(a.d_ln2), bf(a.d_fc1), w(at(j, fc1_w)), nullptr, n, c, h, stream());
    Tensor d_res2 = alloc({B, T, C}, DType::bf16, "d attention residual (B, T, C)");
    layernorm_backward_input_residual(bf(d_res2), bf(d_out), bf(a.d_ln2), bf(a.res2),
                                      w(at(j, ln2_w)), f32(a.ln2_mean), f32(a.ln2_rstd), n, c,
                                      stream());
    return d_res2;
  }

  // The attention half's input gradient from d_res2, the gradient of its output: returns
  // dx (the residual's d_res2 plus ln1's).
  Tensor attention_half_backward_input(int j, BlockActs& a, const Tensor& d_res2, std::int64_t B,
                                       std::int64_t T) {
    const std::int64_t C = config_.d_model, NH = config_.heads;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C);
    a.d_res2 = d_res2;
    Tensor d_atty = alloc({B, T, C}, DType::bf16, "d attention output (B, T, C)");
    linear_backward_input(bf(d_atty), bf(d_res2), w(at(j, proj_w)), nullptr, n, c, c, stream());
    a.d_qkv = alloc({B, T, 3 * C}, DType::bf16, "d attention qkv (B, T, 3C)");
    attention_backward_input(bf(a.d_qkv), bf(d_atty), bf(a.qkv), bf(a.atty), f32(a.lse), int(B),
                             int(T), c, int(NH), stream());
    a.qkv = {};
    a.lse = {};
    a.d_ln1 = alloc({B, T, C}, DType::bf16, "d ln1 output (B, T, C)");
    linear_backward_input(bf(a.d_ln1), bf(a.d_qkv), w(at(j, qkv_w)), nullptr, n, c, 3 * c,
                          stream());
    Tensor dx = alloc({B, T, C}, DType::bf16, "d block input (B, T, C)");
    layernorm_backward_input_residual(bf(dx), bf(d_res2), bf(a.d_ln1), bf(a.x), w(at(j, ln1_w)),
                                      f32(a.ln1_mean), f32(a.ln1_rstd), n, c, stream());
    return dx;
  }

  Tensor head_backward_input(HeadActs& h, float loss_scale, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config_.d_model, V = config_.vocab;
    const int n = static_cast<int>(B * T), c = static_cast<int>(C), v = static_cast<int>(V);
    const std::size_t base = head_base();
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
    h.d_lnf = alloc({B, T, C}, DType::bf16, "d ln_f output (B, T, C)");
    linear_backward_input(bf(h.d_lnf), bf(h.logits), w(base + 2), nullptr, n, c, v, stream());
    Tensor dx = zeros({B, T, C}, DType::bf16, "d ln_f input (B, T, C)");
    layernorm_backward_input(bf(dx), bf(h.d_lnf), bf(h.x), w(base), f32(h.lnf_mean),
                             f32(h.lnf_rstd), n, c, stream());
    return dx;
  }

  void backward_weight_impl(StageStash& stash) {
    CudaStash& st = own(stash, StashPhase::input_done, "backward_weight");
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
  void accumulate_weight_grads(const CudaStash& st, const BucketFinal& on_final) {
    const std::int64_t B = st.B, T = st.T;
    auto final = [&](std::size_t bucket) {
      if (on_final) on_final(bucket);
    };
    if (slice_.has_embedding) {
      embedding_backward_weight<G>(st, st.d_embed, stream());
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

  // The embedding's weight gradients (wte, wpe) from d_embed, the gradient of its output.
  template <class G>
  void embedding_backward_weight(const CudaStash& st, const Tensor& d_embed, cudaStream_t s) {
    conveyor::embedding_backward_weight(g<G>(0), g<G>(1), bf(d_embed), i32(st.tokens),
                                        int(st.B), int(st.T), int(config_.d_model),
                                        int(config_.vocab), s);
  }

  // The weight gradients of the halves of block j the slice holds.
  template <class G>
  void block_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                             cudaStream_t s) {
    if (has_mlp(j)) mlp_half_backward_weight<G>(j, a, B, T, s);
    if (has_attention(j)) attention_half_backward_weight<G>(j, a, B, T, s);
  }

  // Reads d_out, gelu, d_fc1, ln2 (+ statistics), d_ln2 and res2: BlockActs::release_mlp_half.
  template <class G>
  void mlp_half_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                                cudaStream_t s) {
    const int n = static_cast<int>(B * T), c = static_cast<int>(config_.d_model),
              h = static_cast<int>(config_.mlp_hidden());
    linear_backward_weight(g<G>(at(j, fc2_w)), g<G>(at(j, fc2_b)), bf(a.d_out), bf(a.gelu), n, h,
                           c, s);
    linear_backward_weight(g<G>(at(j, fc1_w)), g<G>(at(j, fc1_b)), bf(a.d_fc1), bf(a.ln2), n, c,
                           h, s);
    layernorm_backward_weight(g<G>(at(j, ln2_w)), g<G>(at(j, ln2_b)), bf(a.d_ln2), bf(a.res2),
                              f32(a.ln2_mean), f32(a.ln2_rstd), n, c, s);
  }

  template <class G>
  void attention_half_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                                      cudaStream_t s) {
    const int n = static_cast<int>(B * T), c = static_cast<int>(config_.d_model);
    linear_backward_weight(g<G>(at(j, proj_w)), g<G>(at(j, proj_b)), bf(a.d_res2), bf(a.atty), n,
                           c, c, s);
    linear_backward_weight(g<G>(at(j, qkv_w)), g<G>(at(j, qkv_b)), bf(a.d_qkv), bf(a.ln1), n, c,
                           3 * c, s);
    layernorm_backward_weight(g<G>(at(j, ln1_w)), g<G>(at(j, ln1_b)), bf(a.d_ln1), bf(a.x),
                              f32(a.ln1_mean), f32(a.ln1_rstd), n, c, s);
  }

  template <class G>
  void head_backward_weight(const HeadActs& h, std::int64_t B, std::int64_t T, cudaStream_t s) {
    const int n = static_cast<int>(B * T), c = static_cast<int>(config_.d_model),
              v = static_cast<int>(config_.vocab);
    const std::size_t base = head_base();
    linear_backward_weight(g<G>(base + 2), nullptr, bf(h.logits), bf(h.lnf), n, c, v, s);
    layernorm_backward_weight(g<G>(base), g<G>(base + 1), bf(h.d_lnf), bf(h.x), f32(h.lnf_mean),
                              f32(h.lnf_rstd), n, c, s);
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

std::vector<NamedTensor> cuda_stage_gradients(const StageModel& model) {
  const auto* cuda = dynamic_cast<const CudaStageModel*>(&model);
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
  return std::make_unique<CudaStageModel>(config, slice, seed, options);
}

}  // namespace conveyor
