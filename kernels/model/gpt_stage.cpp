// GptStage on the CPU: the skeleton every architecture shares — the token embedding, the
// blocks cut into halves as the slice holds them (stage_slice.hpp), the head and loss, the
// stash of each micro-batch, backward split into I and W, and model.recompute — with the
// layers themselves taken from the architecture (model.arch): gpt2_layers.hpp or
// llama_layers.hpp. A block is its attention half then its MLP half, each the step
// out = x + f(x) of the residual stream (B, T, C); the skeleton hands each half its input,
// keeps the half's activations in the stash and chains the gradients back.
//
// Exactness across splits: every half runs the same kernels on the same shapes whether it
// sits in a one-stage or a many-stage pipeline, every parameter gradient is accumulated by
// its own kernel call (nothing reduces across blocks or stages), and parameters are
// initialised from (seed, name). So losses and gradients are bitwise independent of the
// split; tests/kernels/model/gpt_stage_test.cpp checks it. That holds for cuts between a
// block's attention and MLP halves too: each half is the same kernel calls either way, and
// the residual stream between them is a tensor of its own (the MLP half's input).
//
// Memory: each half's activations (gpt2_layers.hpp and llama_layers.hpp give them per
// token) are held from forward to backward_weight; backward_input frees what only it reads
// and keeps the gradients backward_weight needs; backward_weight frees everything.
// StageStash::bytes() reports it. model.recompute (recompute.hpp) drops parts of a block's
// activations after its forward and computes them again, from the block's input, at the
// start of its backward_input: with `full` a block holds C floats per token between
// forward and backward.
#include "kernels/model/gpt_stage.hpp"

#include <array>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/model/block_params.hpp"  // half_cut_problem
#include "kernels/model/gpt2_layers.hpp"
#include "kernels/model/llama_layers.hpp"
#include "kernels/model/param_init.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/stage_parts.hpp"
#include "kernels/model/stash_phase.hpp"

namespace conveyor {
namespace {

void validate_llama(const GptConfig& c) {
  const auto n = [](auto v) { return std::to_string(v); };
  if (c.kv_heads < 0 || c.heads % c.kv_head_count() != 0)
    throw std::invalid_argument("GptStage: heads " + n(c.heads) +
                                " is not a multiple of kv_heads " + n(c.kv_head_count()));
  if (c.head_dim() % 2 != 0)
    throw std::invalid_argument("GptStage: the head size d_model / heads = " + n(c.head_dim()) +
                                " is odd; the rotary embedding rotates pairs of dimensions");
  if (c.ffn_dim < 0)
    throw std::invalid_argument("GptStage: ffn_dim " + n(c.ffn_dim) + " is negative");
  if (!(c.rope_theta > 0) || !(c.norm_eps > 0))
    throw std::invalid_argument("GptStage: rope_theta and norm_eps must be > 0");
  if (c.rope_scaling == RopeScaling::llama3 &&
      (!(c.rope_scaling_factor > 0) || !(c.rope_low_freq_factor > 0) ||
       !(c.rope_high_freq_factor > c.rope_low_freq_factor) || c.rope_original_max_position < 1))
    throw std::invalid_argument(
        "GptStage: llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor "
        "and original_max_position >= 1");
}

void validate(const GptConfig& c, const StageSlice& s) {
  if (c.layers < 1 || c.d_model < 1 || c.heads < 1 || c.seq_len < 1 || c.vocab < 1)
    throw std::invalid_argument("GptStage: layers, d_model, heads, seq_len and vocab must be >= 1");
  if (c.d_model % c.heads != 0)
    throw std::invalid_argument("GptStage: d_model " + std::to_string(c.d_model) +
                                " is not a multiple of heads " + std::to_string(c.heads));
  if (c.arch == ModelArch::llama) validate_llama(c);
  if (s.first_block < 0 || s.num_blocks < 0 || s.end_block() > c.layers)
    throw std::invalid_argument("GptStage: blocks [" + std::to_string(s.first_block) + ", " +
                                std::to_string(s.end_block()) + ") outside the model's " +
                                std::to_string(c.layers) + " layers");
  if (s.num_blocks == 0 && !s.has_embedding && !s.has_head)
    throw std::invalid_argument(
        "GptStage: a slice with no blocks must hold the embedding or the head");
  if (const auto problem = half_cut_problem(s))
    throw std::invalid_argument("GptStage: " + *problem);
}

void check_grad_output(const GptConfig& c, const Tensor& grad, std::int64_t B, std::int64_t T) {
  const Shape want{B, T, c.d_model};
  if (!grad.defined() || !grad.device().is_cpu() || grad.dtype() != DType::f32 ||
      grad.shape() != want)
    throw std::invalid_argument("GptStage::backward: grad_output must be f32 " + want.str() +
                                " on cpu, got " + grad.describe());
}

// One block's activations: each half's, empty for a half the slice does not hold.
template <class Layers>
struct BlockActs {
  typename Layers::AttentionHalf::Acts attn;
  typename Layers::MlpHalf::Acts mlp;
};

// One micro-batch's stash: plain data, filled and consumed by Decoder<Layers>.
template <class Layers>
struct DecoderStash final : StageStash {
  DecoderStash(const void* owner_stage, std::int64_t batch, std::int64_t seq, int num_blocks)
      : owner(owner_stage), B(batch), T(seq), blocks(static_cast<std::size_t>(num_blocks)) {}

  std::size_t bytes() const override {
    std::size_t n = 0;
    auto add = [&](const auto& tensors) {
      for (const Tensor* t : tensors) n += t->defined() ? t->bytes() : 0;
    };
    add(std::array<const Tensor*, 2>{&tokens, &d_embed});
    for (const auto& b : blocks) {
      add(b.attn.all());
      add(b.mlp.all());
    }
    add(head.all());
    return n;
  }
  void release() {
    tokens = {};
    d_embed = {};
    blocks.clear();
    head = {};
  }

  const void* owner;  // the Decoder that made it
  std::int64_t B, T;
  StashPhase phase = StashPhase::forward_done;
  Tensor tokens;   // (B, T) i32, on the embedding slice
  Tensor d_embed;  // (B, T, C) gradient of the embedding output
  std::vector<BlockActs<Layers>> blocks;
  typename Layers::Head::Acts head;
};

// The forward and backward walk over a slice's layers, whatever their architecture.
class StageLayers {
 public:
  virtual ~StageLayers() = default;
  /// REQUIRES: input and targets checked, (B, T) the input's. `logits_out`: as
  /// lm_head_forward's, on a slice with the head.
  virtual StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash,
                               std::int64_t B, std::int64_t T, Tensor* logits_out) = 0;
  virtual Tensor backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale) = 0;
  virtual void backward_weight(StageStash& stash) = 0;
};

template <class Layers>
class Decoder final : public StageLayers {
 public:
  using Stash = DecoderStash<Layers>;
  using Acts = BlockActs<Layers>;

  Decoder(const GptConfig& c, const StageSlice& s, std::vector<Param>& params)
      : config_(c),
        slice_(s),
        context_(c),
        attention_(static_cast<std::size_t>(s.num_blocks)),
        mlp_(static_cast<std::size_t>(s.num_blocks)) {
    layout_stage_parts<Layers>(c, s, [&](StagePart part, int block, std::size_t first) {
      const LayerParams p(params, first);
      const auto j = static_cast<std::size_t>(block - s.first_block);
      switch (part) {
        case StagePart::embedding:
          embedding_.emplace(c, context_, p);
          break;
        case StagePart::attention_half:
          attention_[j].emplace(c, context_, p);
          break;
        case StagePart::mlp_half:
          mlp_[j].emplace(c, context_, p);
          break;
        case StagePart::head:
          head_.emplace(c, context_, p);
          break;
      }
    });
  }

  StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash, std::int64_t B,
                       std::int64_t T, Tensor* logits_out) override {
    auto stash = keep_stash ? std::make_unique<Stash>(this, B, T, slice_.num_blocks) : nullptr;
    Tensor x;  // (B, T, C) the residual stream
    if (embedding_) {
      x = Tensor::uninitialized({B, T, config_.d_model});
      embedding_->forward(x.f32(), input.i32(), B, T);
      if (stash) stash->tokens = input;
    } else {
      x = input;  // kept by handle: inputs are never written (see stage_model.hpp)
    }
    for (std::size_t j = 0; j < attention_.size(); ++j) {
      Acts scratch;
      Acts& a = stash ? stash->blocks[j] : scratch;
      x = block_forward(j, x, a, B, T);
      drop_recomputed(j, a);
    }
    StageForward result;
    if (head_) {
      typename Layers::Head::Acts scratch;
      result.loss = head_->forward(x, targets, stash ? stash->head : scratch, B, T, logits_out);
    } else {
      result.activation = x;
    }
    result.stash = std::move(stash);
    return result;
  }

  Tensor backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale) override {
    Stash& st = own_stash<Stash>(stash, this, StashPhase::forward_done, "GptStage::backward_input");
    const std::int64_t B = st.B, T = st.T;
    Tensor d;  // (B, T, C) gradient of the residual stream
    if (head_) {
      d = head_->backward_input(st.head, loss_scale, B, T);
    } else {
      check_grad_output(config_, grad_output, B, T);
      d = grad_output;
    }
    for (std::size_t j = attention_.size(); j-- > 0;)
      d = block_backward_input(j, st.blocks[j], d, B, T);
    st.phase = StashPhase::input_done;
    if (embedding_) {
      st.d_embed = d;
      return {};
    }
    return d;
  }

  void backward_weight(StageStash& stash) override {
    Stash& st = own_stash<Stash>(stash, this, StashPhase::input_done, "GptStage::backward_weight");
    const std::int64_t B = st.B, T = st.T;
    if (embedding_) embedding_->backward_weight(st.d_embed.f32(), st.tokens.i32(), B, T);
    for (std::size_t j = 0; j < attention_.size(); ++j) {
      if (mlp_[j]) mlp_[j]->backward_weight(st.blocks[j].mlp, B, T);
      if (attention_[j]) attention_[j]->backward_weight(st.blocks[j].attn, B, T);
    }
    if (head_) head_->backward_weight(st.head, B, T);
    st.release();
    st.phase = StashPhase::weight_done;
  }

 private:
  // The halves of local block j this slice holds, from the residual stream x; returns the
  // residual stream after them. The MLP half keeps its input (the attention half's output)
  // by handle; nothing keeps the block's output.
  Tensor block_forward(std::size_t j, Tensor x, Acts& a, std::int64_t B, std::int64_t T) {
    if (attention_[j]) {
      a.attn.x = x;
      attention_[j]->forward_inner(a.attn, B, T);
      x = attention_[j]->forward_output(a.attn, B, T);
    }
    if (mlp_[j]) {
      a.mlp.x = x;
      mlp_[j]->forward_inner(a.mlp, B, T);
      x = mlp_[j]->forward_output(a.mlp, B, T);
    }
    return x;
  }

  // model.recompute: after a block's forward, what backward will compute again. An MLP half
  // without its block's attention half keeps its input: it is the block's input.
  void drop_recomputed(std::size_t j, Acts& a) const {
    if (recomputes_attention(config_.recompute) && attention_[j]) attention_[j]->drop_inner(a.attn);
    if (recomputes_mlp(config_.recompute) && mlp_[j]) {
      if (attention_[j]) a.mlp.x = Tensor{};
      mlp_[j]->drop_inner(a.mlp);
    }
  }

  // model.recompute: before a block's backward, what forward dropped — the same kernels on
  // the same block input, so the same bits.
  void recompute(std::size_t j, Acts& a, std::int64_t B, std::int64_t T) const {
    if (recomputes_attention(config_.recompute) && attention_[j])
      attention_[j]->forward_inner(a.attn, B, T);
    if (recomputes_mlp(config_.recompute) && mlp_[j]) {
      if (attention_[j]) a.mlp.x = attention_[j]->forward_output(a.attn, B, T);
      mlp_[j]->forward_inner(a.mlp, B, T);
    }
  }

  // Returns the gradient of the block input; keeps in `a` what backward_weight needs.
  Tensor block_backward_input(std::size_t j, Acts& a, Tensor d, std::int64_t B, std::int64_t T) {
    recompute(j, a, B, T);
    if (mlp_[j]) d = mlp_[j]->backward_input(a.mlp, d, B, T);
    if (attention_[j]) d = attention_[j]->backward_input(a.attn, d, B, T);
    return d;
  }

  GptConfig config_;
  StageSlice slice_;
  typename Layers::Context context_;  // before the layers, which point at it
  std::optional<typename Layers::Embedding> embedding_;
  std::vector<std::optional<typename Layers::AttentionHalf>> attention_;  // by local block
  std::vector<std::optional<typename Layers::MlpHalf>> mlp_;              // by local block
  std::optional<typename Layers::Head> head_;
};

}  // namespace

struct GptStage::Impl {
  GptConfig config;
  StageSlice slice;
  std::vector<Param> params;
  std::vector<Shape> shapes;  // the shape every params[i] must keep
  std::unique_ptr<StageLayers> layers;

  Impl(const GptConfig& c, const StageSlice& s, std::uint64_t seed) : config(c), slice(s) {
    validate(c, s);
    for (auto& l : stage_param_layout(c, s)) {
      Param& p = add(std::move(l.name), std::move(l.shape), l.decay);
      if (l.init == ParamLayout::Init::normal)
        fill_normal(p.value, param_stream_key(seed, l.stream), l.stddev);
      else
        fill_constant(p.value, l.value);
    }
    switch (c.arch) {
      case ModelArch::gpt2:
        layers = std::make_unique<Decoder<gpt2::Layers>>(c, s, params);
        break;
      case ModelArch::llama:
        layers = std::make_unique<Decoder<llama::Layers>>(c, s, params);
        break;
    }
  }

  Param& add(std::string name, Shape shape, bool decay) {
    Param p;
    p.name = std::move(name);
    // Made once and large: fresh pages (filled by fill_normal's threads; a gradient the GPU
    // path never writes on the host costs nothing).
    p.value = Tensor::zeros(shape, DType::f32, HostZeros::fresh_pages);
    p.grad = Tensor::zeros(shape, DType::f32, HostZeros::fresh_pages);
    p.decay = decay;
    shapes.push_back(std::move(shape));
    params.push_back(std::move(p));
    return params.back();
  }

  void check_params() const {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      for (const Tensor* t : {&p.value, &p.grad}) {
        if (!t->defined() || t->dtype() != DType::f32 || !t->device().is_cpu() ||
            t->shape() != shapes[i])
          throw std::logic_error("GptStage: parameter " + p.name + " must be f32 " +
                                 shapes[i].str() + " on cpu, got " + t->describe());
      }
    }
  }

  // Returns (B, T) of a valid input; throws std::invalid_argument naming both shapes.
  std::pair<std::int64_t, std::int64_t> check_input(const Tensor& input) const {
    const std::string seq = "1 <= T <= " + std::to_string(config.seq_len);
    const auto& d = input.shape().dims();
    const bool cpu = input.defined() && input.device().is_cpu();
    if (slice.has_embedding) {
      if (!cpu || input.dtype() != DType::i32 || d.size() != 2 || d[0] < 1 || d[1] < 1 ||
          d[1] > config.seq_len)
        throw std::invalid_argument(
            "GptStage::forward: input must be i32 (B, T) token ids on cpu with " + seq + ", got " +
            input.describe());
      const std::int32_t* tok = input.i32();
      for (std::int64_t i = 0; i < input.numel(); ++i)
        if (tok[i] < 0 || tok[i] >= config.vocab)
          throw std::invalid_argument("GptStage::forward: token id " + std::to_string(tok[i]) +
                                      " at flat position " + std::to_string(i) +
                                      " is outside the vocabulary [0, " +
                                      std::to_string(config.vocab) + ")");
    } else {
      if (!cpu || input.dtype() != DType::f32 || d.size() != 3 || d[0] < 1 || d[1] < 1 ||
          d[1] > config.seq_len || d[2] != config.d_model)
        throw std::invalid_argument("GptStage::forward: input must be f32 (B, T, " +
                                    std::to_string(config.d_model) + ") on cpu with " + seq +
                                    ", got " + input.describe());
    }
    return {d[0], d[1]};
  }

  void check_targets(const Tensor& targets, std::int64_t B, std::int64_t T) const {
    if (!targets.defined() || !targets.device().is_cpu() || targets.dtype() != DType::i32 ||
        targets.shape() != Shape{B, T})
      throw std::invalid_argument("GptStage::forward: targets must be i32 " + Shape{B, T}.str() +
                                  " on cpu, got " + targets.describe());
    const std::int32_t* t = targets.i32();
    for (std::int64_t i = 0; i < targets.numel(); ++i)
      if (t[i] < 0 || t[i] >= config.vocab)
        throw std::invalid_argument("GptStage::forward: target " + std::to_string(t[i]) +
                                    " at flat position " + std::to_string(i) +
                                    " is outside the vocabulary [0, " +
                                    std::to_string(config.vocab) + ")");
  }
};

GptStage::GptStage(const GptConfig& config, const StageSlice& slice, std::uint64_t seed)
    : impl_(std::make_unique<Impl>(config, slice, seed)) {}
GptStage::~GptStage() = default;
GptStage::GptStage(GptStage&&) noexcept = default;
GptStage& GptStage::operator=(GptStage&&) noexcept = default;

const GptConfig& GptStage::config() const { return impl_->config; }
const StageSlice& GptStage::slice() const { return impl_->slice; }
std::vector<Param>& GptStage::params() { return impl_->params; }
const std::vector<Param>& GptStage::params() const { return impl_->params; }

void GptStage::zero_grads() {
  for (Param& p : impl_->params) p.grad.zero();
}

StageForward GptStage::forward(const Tensor& input, const Tensor& targets, bool keep_stash) {
  Impl& s = *impl_;
  s.check_params();
  const auto [B, T] = s.check_input(input);
  if (s.slice.has_head) s.check_targets(targets, B, T);
  return s.layers->forward(input, targets, keep_stash, B, T, nullptr);
}

StageLogits GptStage::forward_logits(const Tensor& input, const Tensor& targets) {
  Impl& s = *impl_;
  if (!s.slice.has_head)
    throw std::invalid_argument("GptStage::forward_logits: the slice does not hold the head");
  s.check_params();
  const auto [B, T] = s.check_input(input);
  s.check_targets(targets, B, T);
  StageLogits out;
  out.loss = s.layers->forward(input, targets, /*keep_stash=*/false, B, T, &out.logits).loss;
  return out;
}

Tensor GptStage::backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale) {
  impl_->check_params();
  return impl_->layers->backward_input(stash, grad_output, loss_scale);
}

void GptStage::backward_weight(StageStash& stash) {
  impl_->check_params();
  impl_->layers->backward_weight(stash);
}

Tensor GptStage::backward(StageStash& stash, const Tensor& grad_output, float loss_scale) {
  Tensor dx = backward_input(stash, grad_output, loss_scale);
  backward_weight(stash);
  return dx;
}

// Matmul FLOPs of one token's forward, counting a multiply-add as 2:
//   per layer: the block's weights, 2 * (qkv + proj + MLP) —
//                gpt2:  2 * 12 C^2 (qkv 3C^2, proj C^2, fc1 4C^2, fc2 4C^2),
//                llama: 2 * (C W + C^2 + 3 C F), W = C + 2 kv_heads hs the qkv width, F the
//                       SwiGLU width (gate and up 2CF, down CF) —
//              plus 2 * 2 * T * C for the attention scores (q k^T) and att @ v over the full
//              context T (the causal mask is ignored, as in the usual 6N + 12LTC estimate);
//   head:      2 * V C for lm_head.
// Embedding lookups, norms, activations, rotary and softmax are not counted. Backward is
// about 2x this.
double gpt_forward_flops_per_token(const GptConfig& c) {
  const double L = static_cast<double>(c.layers), C = static_cast<double>(c.d_model),
               T = static_cast<double>(c.seq_len), V = static_cast<double>(c.vocab);
  if (c.arch == ModelArch::llama) {
    const double W = C + 2.0 * static_cast<double>(c.kv_head_count() * c.head_dim());
    const double F = static_cast<double>(c.llama_ffn_dim());
    return L * (2.0 * (C * W + C * C + 3.0 * C * F) + 2.0 * 2.0 * T * C) + 2.0 * V * C;
  }
  return L * (2.0 * 12.0 * C * C + 2.0 * 2.0 * T * C) + 2.0 * V * C;
}

}  // namespace conveyor
