// GptStage on the CPU: the layers of kernels/cpu/ composed into GPT-2 blocks.
//
// Exactness across splits: every block runs the same kernels on the same shapes whether it
// sits in a one-stage or a many-stage pipeline, every parameter gradient is accumulated by
// its own kernel call (nothing reduces across blocks or stages), and parameters are
// initialised from (seed, name). So losses and gradients are bitwise independent of the
// split; tests/kernels/model/gpt_stage_test.cpp checks it. That holds for cuts between a
// block's attention and MLP halves too (stage_slice.hpp): each half is the same kernel calls
// either way, and the residual stream between them (res2) is a tensor of its own.
//
// Memory: the stash of a micro-batch holds, per block and token, 16C + heads*T + 4 floats
// after forward; backward_input frees qkv, the attention probabilities and the pre-GELU
// activation and adds the output gradients that backward_weight needs (20C + 4 floats per
// block and token); backward_weight frees everything. StageStash::bytes() reports it.
// model.recompute (recompute.hpp) drops parts of a block's activations after its forward
// and computes them again at the start of its backward_input: with `full` a block holds C
// floats per token between forward and backward.
#include "kernels/model/gpt_stage.hpp"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/residual.hpp"
#include "kernels/model/block_params.hpp"
#include "kernels/model/param_init.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/stash_phase.hpp"

namespace conveyor {
namespace {

// What one block keeps between forward, backward_input and backward_weight.
// Shapes: x, ln1, atty, res2, ln2 and every d_* except d_qkv, d_fc1 are (B, T, C).
struct BlockActs {
  // forward
  Tensor x;                        // (B, T, C) block input, the residual stream
  Tensor ln1, ln1_mean, ln1_rstd;  // (B, T, C), (B, T), (B, T)
  Tensor qkv;                      // (B, T, 3C); freed by backward_input
  Tensor att;                      // (B, NH, T, T); freed by backward_input
  Tensor atty;                     // (B, T, C) attention output, input of attn.proj
  Tensor res2;                     // (B, T, C) x + attn.proj(atty)
  Tensor ln2, ln2_mean, ln2_rstd;  // (B, T, C), (B, T), (B, T)
  Tensor fc1;                      // (B, T, 4C) pre-GELU; freed by backward_input
  Tensor gelu;                     // (B, T, 4C) input of mlp.fc2
  // backward_input, for backward_weight
  Tensor d_out;   // (B, T, C) gradient of the block output
  Tensor d_fc1;   // (B, T, 4C) gradient of the pre-GELU activation
  Tensor d_ln2;   // (B, T, C)
  Tensor d_res2;  // (B, T, C)
  Tensor d_qkv;   // (B, T, 3C)
  Tensor d_ln1;   // (B, T, C)

  std::array<const Tensor*, 19> all() const {
    return {&x,     &ln1,   &ln1_mean, &ln1_rstd, &qkv,  &att,  &atty,
            &res2,  &ln2,   &ln2_mean, &ln2_rstd, &fc1,  &gelu, &d_out,
            &d_fc1, &d_ln2, &d_res2,   &d_qkv,    &d_ln1};
  }
};

// What the final LayerNorm, the LM head and the loss keep.
struct HeadActs {
  Tensor targets;                  // (B, T) i32
  Tensor x;                        // (B, T, C) input of ln_f
  Tensor lnf, lnf_mean, lnf_rstd;  // (B, T, C), (B, T), (B, T)
  Tensor logits;                   // (B, T, V): logits, then probabilities, then dlogits
  Tensor d_lnf;                    // (B, T, C)
};


// One micro-batch's stash: plain data, filled and consumed by GptStage::Impl.
struct GptStash final : StageStash {
  GptStash(const void* owner_stage, std::int64_t batch, std::int64_t seq, int num_blocks)
      : owner(owner_stage), B(batch), T(seq), blocks(static_cast<std::size_t>(num_blocks)) {}

  std::size_t bytes() const override { return stash_bytes(*this); }
  void release() { release_stash(*this); }

  const void* owner;  // the GptStage::Impl that made it
  std::int64_t B, T;
  StashPhase phase = StashPhase::forward_done;
  Tensor tokens;   // (B, T) i32, on the embedding slice
  Tensor d_embed;  // (B, T, C) gradient of the embedding output
  std::vector<BlockActs> blocks;
  HeadActs head;
};

}  // namespace

struct GptStage::Impl {
  GptConfig config;
  StageSlice slice;
  std::vector<Param> params;
  std::vector<Shape> shapes;  // the shape every params[i] must keep

  Impl(const GptConfig& c, const StageSlice& s, std::uint64_t seed) : config(c), slice(s) {
    validate();
    for (auto& l : stage_param_layout(c, s)) {
      Param& p = add(std::move(l.name), std::move(l.shape), l.decay);
      if (l.init == ParamLayout::Init::normal) fill_normal(p.value, param_stream_key(seed, l.stream), l.stddev);
      else fill_constant(p.value, l.value);
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

  void validate() const {
    const GptConfig& c = config;
    if (c.layers < 1 || c.d_model < 1 || c.heads < 1 || c.seq_len < 1 || c.vocab < 1)
      throw std::invalid_argument(
          "GptStage: layers, d_model, heads, seq_len and vocab must be >= 1");
    if (c.d_model % c.heads != 0)
      throw std::invalid_argument("GptStage: d_model " + std::to_string(c.d_model) +
                                  " is not a multiple of heads " + std::to_string(c.heads));
    const StageSlice& s = slice;
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

  // Parameter access by position in params(). Values are looked up on every call, so a
  // caller may replace a Param's tensors (e.g. when loading weights) between calls.
  std::size_t head_base() const { return conveyor::head_base(slice); }
  std::size_t at(int local_block, BlockParam k) const {
    return block_param(slice, local_block, k);
  }
  bool has_attention(int local_block) const {
    return slice.holds_attention(slice.first_block + local_block);
  }
  bool has_mlp(int local_block) const { return slice.holds_mlp(slice.first_block + local_block); }
  const float* w(std::size_t i) const { return params[i].value.f32(); }
  float* g(std::size_t i) { return params[i].grad.f32(); }

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

  void check_grad_output(const Tensor& grad, std::int64_t B, std::int64_t T) const {
    const Shape want{B, T, config.d_model};
    if (!grad.defined() || !grad.device().is_cpu() || grad.dtype() != DType::f32 ||
        grad.shape() != want)
      throw std::invalid_argument("GptStage::backward: grad_output must be f32 " + want.str() +
                                  " on cpu, got " + grad.describe());
  }

  GptStash& own(StageStash& stash, StashPhase want, const char* who) const {
    return own_stash<GptStash>(stash, this, want, std::string("GptStage::") + who);
  }

  // The halves of block j this slice holds, from the residual stream x; returns the residual
  // stream after them (res2 when the MLP half is on the next slice).
  Tensor block_forward(int j, const Tensor& x, BlockActs& a, std::int64_t B, std::int64_t T) {
    if (has_attention(j)) {
      a.x = x;
      attention_half(j, a, B, T);
      attention_residual(j, a, B, T);
      if (!has_mlp(j)) return std::move(a.res2);  // the output; backward does not read it
    } else {
      a.res2 = x;  // the MLP half's input: kept by handle, never written
    }
    mlp_half(j, a, B, T);
    const std::int64_t C = config.d_model, H = config.mlp_hidden(), N = B * T;
    Tensor out = Tensor::uninitialized({B, T, C});
    cpu::linear_forward(out.f32(), a.gelu.f32(), w(at(j, fc2_w)), w(at(j, fc2_b)), N, H, C);
    cpu::residual_forward(out.f32(), a.res2.f32(), out.f32(), N * C);
    return out;
  }

  // ln1, qkv and attention of block j from a.x: fills ln1 (and its statistics), qkv, att
  // and atty.
  void attention_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config.d_model, NH = config.heads, N = B * T;
    a.ln1 = Tensor::uninitialized({B, T, C});
    a.ln1_mean = Tensor::uninitialized({B, T});
    a.ln1_rstd = Tensor::uninitialized({B, T});
    cpu::layernorm_forward(a.ln1.f32(), a.ln1_mean.f32(), a.ln1_rstd.f32(), a.x.f32(),
                           w(at(j, ln1_w)), w(at(j, ln1_b)), N, C);
    a.qkv = Tensor::uninitialized({B, T, 3 * C});
    cpu::linear_forward(a.qkv.f32(), a.ln1.f32(), w(at(j, qkv_w)), w(at(j, qkv_b)), N, C, 3 * C);
    a.att = Tensor::uninitialized({B, NH, T, T});
    a.atty = Tensor::uninitialized({B, T, C});
    cpu::attention_forward(a.atty.f32(), a.att.f32(), a.qkv.f32(), B, T, C, NH);
  }

  // attn.proj and the residual of block j from a.x and a.atty: fills res2.
  void attention_residual(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config.d_model, N = B * T;
    a.res2 = Tensor::uninitialized({B, T, C});
    cpu::linear_forward(a.res2.f32(), a.atty.f32(), w(at(j, proj_w)), w(at(j, proj_b)), N, C, C);
    cpu::residual_forward(a.res2.f32(), a.x.f32(), a.res2.f32(), N * C);
  }

  // ln2, fc1 and GELU of block j from a.res2: fills ln2 (and its statistics), fc1 and gelu.
  void mlp_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config.d_model, H = config.mlp_hidden(), N = B * T;
    a.ln2 = Tensor::uninitialized({B, T, C});
    a.ln2_mean = Tensor::uninitialized({B, T});
    a.ln2_rstd = Tensor::uninitialized({B, T});
    cpu::layernorm_forward(a.ln2.f32(), a.ln2_mean.f32(), a.ln2_rstd.f32(), a.res2.f32(),
                           w(at(j, ln2_w)), w(at(j, ln2_b)), N, C);
    a.fc1 = Tensor::uninitialized({B, T, H});
    cpu::linear_forward(a.fc1.f32(), a.ln2.f32(), w(at(j, fc1_w)), w(at(j, fc1_b)), N, C, H);
    a.gelu = Tensor::uninitialized({B, T, H});
    cpu::gelu_forward(a.gelu.f32(), a.fc1.f32(), N * H);
  }

  // model.recompute: after a block's forward, what backward will compute again. A block
  // without its attention half keeps res2: it is the block's input.
  void drop_recomputed(int j, BlockActs& a) const {
    if (recomputes_attention(config.recompute))
      a.ln1 = a.ln1_mean = a.ln1_rstd = a.qkv = a.att = a.atty = Tensor{};
    if (recomputes_mlp(config.recompute)) {
      if (has_attention(j)) a.res2 = Tensor{};
      a.ln2 = a.ln2_mean = a.ln2_rstd = a.fc1 = a.gelu = Tensor{};
    }
  }

  // model.recompute: before a block's backward, what forward dropped — the same kernels on
  // the same a.x (or a.res2), so the same bits.
  void recompute(int j, BlockActs& a, std::int64_t B, std::int64_t T) {
    if (recomputes_attention(config.recompute) && has_attention(j)) attention_half(j, a, B, T);
    if (recomputes_mlp(config.recompute) && has_mlp(j)) {
      if (has_attention(j)) attention_residual(j, a, B, T);
      mlp_half(j, a, B, T);
    }
  }

  // Returns the gradient of the block input; keeps in `a` what block_backward_weight needs.
  Tensor block_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                              std::int64_t T) {
    recompute(j, a, B, T);
    const std::int64_t C = config.d_model, NH = config.heads, H = config.mlp_hidden(), N = B * T;
    if (has_mlp(j)) {
      a.d_out = d_out;
      a.d_fc1 = Tensor::uninitialized({B, T, H});
      cpu::linear_backward_input(a.d_fc1.f32(), d_out.f32(), w(at(j, fc2_w)), N, H, C);
      cpu::gelu_backward_input(a.d_fc1.f32(), a.d_fc1.f32(), a.fc1.f32(), N * H);
      a.fc1 = {};
      a.d_ln2 = Tensor::uninitialized({B, T, C});
      cpu::linear_backward_input(a.d_ln2.f32(), a.d_fc1.f32(), w(at(j, fc1_w)), N, C, H);
      a.d_res2 = d_out.clone();
      cpu::layernorm_backward_input(a.d_res2.f32(), a.d_ln2.f32(), a.res2.f32(), w(at(j, ln2_w)),
                                    a.ln2_mean.f32(), a.ln2_rstd.f32(), N, C);
      if (!has_attention(j)) return std::move(a.d_res2);  // the gradient of the block input
    } else {
      a.d_res2 = d_out;  // the block's output is res2; read, never written
    }
    Tensor d_atty = Tensor::uninitialized({B, T, C});
    cpu::linear_backward_input(d_atty.f32(), a.d_res2.f32(), w(at(j, proj_w)), N, C, C);
    a.d_qkv = Tensor::uninitialized({B, T, 3 * C});
    cpu::attention_backward_input(a.d_qkv.f32(), d_atty.f32(), a.qkv.f32(), a.att.f32(), B, T, C,
                                  NH);
    a.qkv = {};
    a.att = {};
    a.d_ln1 = Tensor::uninitialized({B, T, C});
    cpu::linear_backward_input(a.d_ln1.f32(), a.d_qkv.f32(), w(at(j, qkv_w)), N, C, 3 * C);
    Tensor dx = a.d_res2.clone();
    cpu::layernorm_backward_input(dx.f32(), a.d_ln1.f32(), a.x.f32(), w(at(j, ln1_w)),
                                  a.ln1_mean.f32(), a.ln1_rstd.f32(), N, C);
    return dx;
  }

  void block_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config.d_model, H = config.mlp_hidden(), N = B * T;
    if (has_mlp(j)) {
      cpu::linear_backward_weight(g(at(j, fc2_w)), g(at(j, fc2_b)), a.d_out.f32(), a.gelu.f32(), N,
                                  H, C);
      cpu::linear_backward_weight(g(at(j, fc1_w)), g(at(j, fc1_b)), a.d_fc1.f32(), a.ln2.f32(), N,
                                  C, H);
      cpu::layernorm_backward_weight(g(at(j, ln2_w)), g(at(j, ln2_b)), a.d_ln2.f32(),
                                     a.res2.f32(), a.ln2_mean.f32(), a.ln2_rstd.f32(), N, C);
    }
    if (!has_attention(j)) return;
    cpu::linear_backward_weight(g(at(j, proj_w)), g(at(j, proj_b)), a.d_res2.f32(), a.atty.f32(), N,
                                C, C);
    cpu::linear_backward_weight(g(at(j, qkv_w)), g(at(j, qkv_b)), a.d_qkv.f32(), a.ln1.f32(), N, C,
                                3 * C);
    cpu::layernorm_backward_weight(g(at(j, ln1_w)), g(at(j, ln1_b)), a.d_ln1.f32(), a.x.f32(),
                                   a.ln1_mean.f32(), a.ln1_rstd.f32(), N, C);
  }

  double head_forward(const Tensor& x, const Tensor& targets, HeadActs& h, std::int64_t B,
                      std::int64_t T) {
    const std::int64_t C = config.d_model, V = config.vocab, N = B * T;
    const std::size_t base = head_base();
    h.targets = targets;
    h.x = x;
    h.lnf = Tensor::uninitialized({B, T, C});
    h.lnf_mean = Tensor::uninitialized({B, T});
    h.lnf_rstd = Tensor::uninitialized({B, T});
    cpu::layernorm_forward(h.lnf.f32(), h.lnf_mean.f32(), h.lnf_rstd.f32(), x.f32(), w(base),
                           w(base + 1), N, C);
    h.logits = Tensor::uninitialized({B, T, V});
    cpu::linear_forward<float>(h.logits.f32(), h.lnf.f32(), w(base + 2), nullptr, N, C, V);
    return cpu::cross_entropy_forward(h.logits.f32(), h.logits.f32(), h.targets.i32(), N, V);
  }

  Tensor head_backward_input(HeadActs& h, float loss_scale, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config.d_model, V = config.vocab, N = B * T;
    const std::size_t base = head_base();
    float* dlogits = h.logits.f32();  // (B, T, V), over the probabilities
    cpu::cross_entropy_backward_input(dlogits, dlogits, h.targets.i32(),
                                      loss_scale / static_cast<float>(N), N, V);
    h.d_lnf = Tensor::uninitialized({B, T, C});
    cpu::linear_backward_input(h.d_lnf.f32(), dlogits, w(base + 2), N, C, V);
    Tensor dx = Tensor::zeros({B, T, C});  // zeros: layernorm_backward_input adds into it
    cpu::layernorm_backward_input(dx.f32(), h.d_lnf.f32(), h.x.f32(), w(base), h.lnf_mean.f32(),
                                  h.lnf_rstd.f32(), N, C);
    return dx;
  }

  void head_backward_weight(const HeadActs& h, std::int64_t B, std::int64_t T) {
    const std::int64_t C = config.d_model, V = config.vocab, N = B * T;
    const std::size_t base = head_base();
    cpu::linear_backward_weight<float>(g(base + 2), nullptr, h.logits.f32(), h.lnf.f32(), N, C, V);
    cpu::layernorm_backward_weight(g(base), g(base + 1), h.d_lnf.f32(), h.x.f32(), h.lnf_mean.f32(),
                                   h.lnf_rstd.f32(), N, C);
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
  const std::int64_t C = s.config.d_model;

  auto stash = keep_stash ? std::make_unique<GptStash>(&s, B, T, s.slice.num_blocks) : nullptr;
  Tensor x;  // (B, T, C) the residual stream
  if (s.slice.has_embedding) {
    x = Tensor::uninitialized({B, T, C});
    cpu::embedding_forward(x.f32(), input.i32(), s.w(0), s.w(1), B, T, C);
    if (stash) stash->tokens = input;
  } else {
    x = input;  // kept by handle: inputs are never written (see stage_model.hpp)
  }
  for (int j = 0; j < s.slice.num_blocks; ++j) {
    BlockActs scratch;
    BlockActs& a = stash ? stash->blocks[static_cast<std::size_t>(j)] : scratch;
    x = s.block_forward(j, x, a, B, T);
    s.drop_recomputed(j, a);
  }
  StageForward result;
  if (s.slice.has_head) {
    HeadActs scratch;
    result.loss = s.head_forward(x, targets, stash ? stash->head : scratch, B, T);
  } else {
    result.activation = x;
  }
  result.stash = std::move(stash);
  return result;
}

Tensor GptStage::backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale) {
  Impl& s = *impl_;
  s.check_params();
  GptStash& st = s.own(stash, StashPhase::forward_done, "backward_input");
  const std::int64_t B = st.B, T = st.T;
  Tensor d;  // (B, T, C) gradient of the residual stream
  if (s.slice.has_head) {
    d = s.head_backward_input(st.head, loss_scale, B, T);
  } else {
    s.check_grad_output(grad_output, B, T);
    d = grad_output;
  }
  for (int j = s.slice.num_blocks - 1; j >= 0; --j)
    d = s.block_backward_input(j, st.blocks[static_cast<std::size_t>(j)], d, B, T);
  st.phase = StashPhase::input_done;
  if (s.slice.has_embedding) {
    st.d_embed = d;
    return {};
  }
  return d;
}

void GptStage::backward_weight(StageStash& stash) {
  Impl& s = *impl_;
  s.check_params();
  GptStash& st = s.own(stash, StashPhase::input_done, "backward_weight");
  const std::int64_t B = st.B, T = st.T;
  if (s.slice.has_embedding)
    cpu::embedding_backward_weight(s.g(0), s.g(1), st.d_embed.f32(), st.tokens.i32(), B, T,
                                   s.config.d_model);
  for (int j = 0; j < s.slice.num_blocks; ++j)
    s.block_backward_weight(j, st.blocks[static_cast<std::size_t>(j)], B, T);
  if (s.slice.has_head) s.head_backward_weight(st.head, B, T);
  st.release();
  st.phase = StashPhase::weight_done;
}

Tensor GptStage::backward(StageStash& stash, const Tensor& grad_output, float loss_scale) {
  Tensor dx = backward_input(stash, grad_output, loss_scale);
  backward_weight(stash);
  return dx;
}

// Matmul FLOPs of one token's forward, counting a multiply-add as 2:
//   per layer: 2 * 12 C^2 for the qkv (3C^2), proj (C^2), fc1 (4C^2) and fc2 (4C^2) weights,
//              plus 2 * 2 * T * C for the attention scores (q k^T) and att @ v over the full
//              context T (the causal mask is ignored, as in the usual 6N + 12LTC estimate);
//   head:      2 * V C for lm_head.
// Embedding lookups, norms, GELU and softmax are not counted. Backward is about 2x this.
double gpt_forward_flops_per_token(const GptConfig& c) {
  const double L = static_cast<double>(c.layers), C = static_cast<double>(c.d_model),
               T = static_cast<double>(c.seq_len), V = static_cast<double>(c.vocab);
  return L * (2.0 * 12.0 * C * C + 2.0 * 2.0 * T * C) + 2.0 * V * C;
}

}  // namespace conveyor
