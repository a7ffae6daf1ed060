// The decoder's forward: gpt2_layers.cpp's and llama_layers.cpp's forward on n rows of one
// sequence, attention swapped for the cached one. Parameters are found by name once.
#include "kernels/model/kv_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cached_attention.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rotary.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/model/layer_params.hpp"
#include "kernels/model/llama_layers.hpp"

namespace conveyor {
namespace {

// A block's weights, GPT-2's or Llama's (the other's stay null).
struct BlockWeights {
  const float *norm1_w = nullptr, *norm1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr;
  const float *proj_w = nullptr, *proj_b = nullptr;
  const float *norm2_w = nullptr, *norm2_b = nullptr, *up_w = nullptr, *up_b = nullptr;
  const float *down_w = nullptr, *down_b = nullptr;
};

// x += y over n floats (the residual stream).
void add_in_place(float* x, const float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

struct KvDecoder::Impl {
  GptConfig c;
  KvCache cache;
  std::optional<llama::Context> rope;  // Llama: training's rotary tables (seq_len, hs/2)
  const float *wte = nullptr, *wpe = nullptr, *norm_f_w = nullptr, *norm_f_b = nullptr,
              *lm_head = nullptr;
  std::vector<BlockWeights> blocks;

  Impl(const GptConfig& config, const std::vector<Param>& params, std::int64_t max_positions)
      : c(config),
        cache(config, max_positions > 0 ? std::min(max_positions, config.seq_len) : config.seq_len) {
    std::map<std::string, const Param*> by_name;
    for (const Param& p : params) by_name[p.name] = &p;
    const auto get = [&](const std::string& name, Shape shape) -> const float* {
      const auto it = by_name.find(name);
      if (it == by_name.end()) throw std::invalid_argument("KvDecoder: no parameter " + name);
      const Tensor& t = it->second->value;
      if (t.dtype() != DType::f32 || t.shape() != shape)
        throw std::invalid_argument(fmt::format("KvDecoder: {} is {}, the model needs f32 {}", name,
                                                t.describe(), shape.str()));
      return t.f32();
    };
    const std::int64_t C = c.d_model, V = c.vocab;
    wte = get("wte.weight", {V, C});
    lm_head = get("lm_head.weight", {V, C});
    for (int b = 0; b < c.layers; ++b) {
      BlockWeights w;
      const auto name = [b](const char* rest) { return block_param_name(b, rest); };
      if (c.arch == ModelArch::gpt2) {
        const std::int64_t H = c.mlp_hidden();
        w.norm1_w = get(name("ln1.weight"), {C});
        w.norm1_b = get(name("ln1.bias"), {C});
        w.qkv_w = get(name("attn.qkv.weight"), {3 * C, C});
        w.qkv_b = get(name("attn.qkv.bias"), {3 * C});
        w.proj_w = get(name("attn.proj.weight"), {C, C});
        w.proj_b = get(name("attn.proj.bias"), {C});
        w.norm2_w = get(name("ln2.weight"), {C});
        w.norm2_b = get(name("ln2.bias"), {C});
        w.up_w = get(name("mlp.fc1.weight"), {H, C});
        w.up_b = get(name("mlp.fc1.bias"), {H});
        w.down_w = get(name("mlp.fc2.weight"), {C, H});
        w.down_b = get(name("mlp.fc2.bias"), {C});
      } else {
        const std::int64_t F = c.llama_ffn_dim(), W = qkv_width();
        w.norm1_w = get(name("attn_norm.weight"), {C});
        w.qkv_w = get(name("attn.qkv.weight"), {W, C});
        w.proj_w = get(name("attn.o.weight"), {C, C});
        w.norm2_w = get(name("mlp_norm.weight"), {C});
        w.up_w = get(name("mlp.gate_up.weight"), {2 * F, C});
        w.down_w = get(name("mlp.down.weight"), {C, F});
      }
      blocks.push_back(w);
    }
    if (c.arch == ModelArch::gpt2) {
      wpe = get("wpe.weight", {c.seq_len, C});
      norm_f_w = get("ln_f.weight", {C});
      norm_f_b = get("ln_f.bias", {C});
    } else {
      norm_f_w = get("norm_f.weight", {C});
      rope.emplace(c);
    }
  }

  std::int64_t qkv_width() const { return c.d_model + 2 * c.kv_head_count() * c.head_dim(); }

  // Norm of n rows of x into out (GPT-2: LayerNorm with bias; Llama: RMSNorm).
  void norm(float* out, const float* x, const float* w, const float* b, std::int64_t n) const {
    std::vector<float> s1(static_cast<std::size_t>(n)), s2(static_cast<std::size_t>(n));
    if (c.arch == ModelArch::gpt2)
      cpu::layernorm_forward(out, s1.data(), s2.data(), x, w, b, n, c.d_model);
    else
      cpu::rmsnorm_forward(out, s1.data(), x, w, c.norm_eps, n, c.d_model);
  }

  // x (n, C) += attention(norm1(x)) for positions [pos, pos + n); writes the cache rows.
  void attention(float* x, const BlockWeights& w, std::size_t block, std::int64_t pos,
                 std::int64_t n) {
    const std::int64_t C = c.d_model, NH = c.heads, hs = c.head_dim();
    const std::int64_t NKV = c.arch == ModelArch::gpt2 ? NH : c.kv_head_count();
    const std::int64_t kv = NKV * hs, W = C + 2 * kv;
    Tensor xn = Tensor::uninitialized({n, C});
    norm(xn.f32(), x, w.norm1_w, w.norm1_b, n);
    Tensor qkv = Tensor::uninitialized({n, W});  // rows [q (C) | k (kv) | v (kv)]
    cpu::linear_forward(qkv.f32(), xn.f32(), w.qkv_w, w.qkv_b, n, C, W);
    if (rope) {  // each row at its own position: the tables' rows from pos on
      const std::int64_t half = hs / 2;
      const float* cos = rope->cos.f32() + pos * half;
      const float* sin = rope->sin.f32() + pos * half;
      cpu::rotary_forward(qkv.f32(), cos, sin, 1, n, NH, hs, W);
      cpu::rotary_forward(qkv.f32() + C, cos, sin, 1, n, NKV, hs, W);
    }
    float* keys = cache.keys[block].f32();      // (capacity, kv)
    float* values = cache.values[block].f32();  // (capacity, kv)
    for (std::int64_t i = 0; i < n; ++i) {
      std::memcpy(keys + (pos + i) * kv, qkv.f32() + i * W + C, sizeof(float) * kv);
      std::memcpy(values + (pos + i) * kv, qkv.f32() + i * W + C + kv, sizeof(float) * kv);
    }
    Tensor atty = Tensor::uninitialized({n, C});
    cpu::cached_attention_forward(atty.f32(), qkv.f32(), W, keys, values, pos, n, C, NH, NKV);
    Tensor out = Tensor::uninitialized({n, C});
    cpu::linear_forward(out.f32(), atty.f32(), w.proj_w, w.proj_b, n, C, C);
    add_in_place(x, out.f32(), n * C);
  }

  // x (n, C) += mlp(norm2(x)).
  void mlp(float* x, const BlockWeights& w, std::int64_t n) const {
    const std::int64_t C = c.d_model;
    Tensor xn = Tensor::uninitialized({n, C});
    norm(xn.f32(), x, w.norm2_w, w.norm2_b, n);
    Tensor out = Tensor::uninitialized({n, C});
    if (c.arch == ModelArch::gpt2) {
      const std::int64_t H = c.mlp_hidden();
      Tensor h = Tensor::uninitialized({n, H});
      cpu::linear_forward(h.f32(), xn.f32(), w.up_w, w.up_b, n, C, H);
      cpu::gelu_forward(h.f32(), h.f32(), n * H);
      cpu::linear_forward(out.f32(), h.f32(), w.down_w, w.down_b, n, H, C);
    } else {
      const std::int64_t F = c.llama_ffn_dim();
      Tensor gate_up = Tensor::uninitialized({n, 2 * F});
      cpu::linear_forward<float>(gate_up.f32(), xn.f32(), w.up_w, nullptr, n, C, 2 * F);
      Tensor h = Tensor::uninitialized({n, F});
      cpu::swiglu_forward(h.f32(), gate_up.f32(), n, F);
      cpu::linear_forward<float>(out.f32(), h.f32(), w.down_w, nullptr, n, F, C);
    }
    add_in_place(x, out.f32(), n * C);
  }

  Tensor append(std::span<const std::int32_t> tokens, bool last_only) {
    const std::int64_t n = static_cast<std::int64_t>(tokens.size()), pos = cache.length,
                       C = c.d_model, V = c.vocab;
    if (n == 0) throw std::invalid_argument("KvDecoder::append: no tokens");
    if (pos + n > cache.capacity)
      throw std::invalid_argument(fmt::format(
          "KvDecoder::append: positions [{}, {}) go beyond the cache's {} (the model's seq_len is {})", pos, pos + n,
          cache.capacity, c.seq_len));
    for (std::int32_t t : tokens)
      if (t < 0 || t >= V)
        throw std::invalid_argument(fmt::format("KvDecoder::append: token {} outside the vocabulary [0, {})", t, V));
    Tensor x = Tensor::uninitialized({n, C});  // the residual stream
    for (std::int64_t i = 0; i < n; ++i) {
      float* row = x.f32() + i * C;
      const float* e = wte + std::int64_t{tokens[static_cast<std::size_t>(i)]} * C;
      for (std::int64_t k = 0; k < C; ++k) row[k] = e[k] + (wpe ? wpe[(pos + i) * C + k] : 0.0f);
    }
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      attention(x.f32(), blocks[b], b, pos, n);
      mlp(x.f32(), blocks[b], n);
    }
    cache.length = pos + n;
    const std::int64_t first = last_only ? n - 1 : 0, rows = n - first;
    Tensor xn = Tensor::uninitialized({rows, C});
    norm(xn.f32(), x.f32() + first * C, norm_f_w, norm_f_b, rows);
    Tensor logits = Tensor::uninitialized({rows, V});
    cpu::linear_forward<float>(logits.f32(), xn.f32(), lm_head, nullptr, rows, C, V);
    return logits;
  }
};

KvDecoder::KvDecoder(const GptConfig& config, const std::vector<Param>& params, std::int64_t max_positions)
    : impl_(std::make_unique<Impl>(config, params, max_positions)) {}
KvDecoder::~KvDecoder() = default;
KvDecoder::KvDecoder(KvDecoder&&) noexcept = default;
KvDecoder& KvDecoder::operator=(KvDecoder&&) noexcept = default;

Tensor KvDecoder::append(std::span<const std::int32_t> tokens, bool last_only) {
  return impl_->append(tokens, last_only);
}
std::int64_t KvDecoder::length() const { return impl_->cache.length; }
std::int64_t KvDecoder::capacity() const { return impl_->cache.capacity; }
void KvDecoder::reset() { impl_->cache.length = 0; }

}  // namespace conveyor
