#pragma once
// A plain forward of Hugging Face's LlamaForCausalLM and GPT2LMHeadModel in double, written
// from the equations of transformers' modeling code and reading the tensors by their
// Hugging Face names (hf_model_folder.hpp's HfTensor): nothing of conveyor's kernels, name
// mapping or fused layouts. A test that imports the same tensors and compares conveyor's
// logits with these checks the import and the kernels together against the model's
// definition, as scripts/hf_reference_check.py does against transformers itself where it
// is installed. Slow (naive loops): for models of a few thousand weights.
//   Llama: h = embed[x]; per layer h += o(attn(rope(q), rope(k), v)) of rmsnorm(h), then
//          h += down(silu(gate(n)) * up(n)) of n = rmsnorm(h); logits = lm_head(rmsnorm(h))
//          (embed_tokens when tied). Rotary: rotate-half over the head's two halves,
//          inverse frequencies theta^(-2i/hd), llama3-scaled when rope_parameters or
//          rope_scaling says so; grouped-query: query head h reads kv head h / (NH / NKV).
//   GPT-2: h = wte[x] + wpe[t]; per layer h += c_proj(attn(c_attn(ln_1(h)))), then
//          h += mlp.c_proj(gelu_tanh(c_fc(ln_2(h)))); logits = ln_f(h) wte^T. Conv1D
//          weights are (in, out): y = x W + b.
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "tests/support/hf_model_folder.hpp"

namespace conveyor::testing {

struct HfReferenceOutput {
  std::vector<double> logits;  // (B, T, V)
  double loss = 0.0;           // mean over B*T of -log softmax(logits)[target]
};

namespace hf_reference_detail {

using Vec = std::vector<double>;

// y (N, out) = x (N, in) W^T for a Linear weight (out, in); + b when given.
inline Vec linear(const Vec& x, const HfTensor& w, std::int64_t N, const HfTensor* b = nullptr) {
  const std::int64_t out = w.shape[0], in = w.shape[1];
  Vec y(static_cast<std::size_t>(N * out));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = b ? b->values[static_cast<std::size_t>(o)] : 0.0;
      for (std::int64_t i = 0; i < in; ++i)
        s += x[static_cast<std::size_t>(n * in + i)] * w.values[static_cast<std::size_t>(o * in + i)];
      y[static_cast<std::size_t>(n * out + o)] = s;
    }
  return y;
}

// y (N, out) = x (N, in) W + b for a Conv1D weight (in, out).
inline Vec conv1d(const Vec& x, const HfTensor& w, const HfTensor& b, std::int64_t N) {
  const std::int64_t in = w.shape[0], out = w.shape[1];
  Vec y(static_cast<std::size_t>(N * out));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = b.values[static_cast<std::size_t>(o)];
      for (std::int64_t i = 0; i < in; ++i)
        s += x[static_cast<std::size_t>(n * in + i)] * w.values[static_cast<std::size_t>(i * out + o)];
      y[static_cast<std::size_t>(n * out + o)] = s;
    }
  return y;
}

inline Vec rmsnorm(const Vec& x, const HfTensor& w, std::int64_t N, std::int64_t C, double eps) {
  Vec y(x.size());
  for (std::int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (std::int64_t c = 0; c < C; ++c) ss += x[static_cast<std::size_t>(n * C + c)] * x[static_cast<std::size_t>(n * C + c)];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
    for (std::int64_t c = 0; c < C; ++c)
      y[static_cast<std::size_t>(n * C + c)] = x[static_cast<std::size_t>(n * C + c)] * r * w.values[static_cast<std::size_t>(c)];
  }
  return y;
}

inline Vec layernorm(const Vec& x, const HfTensor& w, const HfTensor& b, std::int64_t N, std::int64_t C, double eps) {
  Vec y(x.size());
  for (std::int64_t n = 0; n < N; ++n) {
    double mean = 0, var = 0;
    for (std::int64_t c = 0; c < C; ++c) mean += x[static_cast<std::size_t>(n * C + c)];
    mean /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) {
      const double d = x[static_cast<std::size_t>(n * C + c)] - mean;
      var += d * d;
    }
    const double r = 1.0 / std::sqrt(var / static_cast<double>(C) + eps);
    for (std::int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<std::size_t>(n * C + c);
      y[i] = (x[i] - mean) * r * w.values[static_cast<std::size_t>(c)] + b.values[static_cast<std::size_t>(c)];
    }
  }
  return y;
}

// Causal attention of one sequence (T rows): q (T, NH*hd), k and v (T, NKV*hd), query head
// h reading kv head h / (NH / NKV); returns (T, NH*hd).
inline Vec attention(const Vec& q, const Vec& k, const Vec& v, std::int64_t T, std::int64_t NH, std::int64_t NKV,
                     std::int64_t hd) {
  Vec out(static_cast<std::size_t>(T * NH * hd), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (std::int64_t h = 0; h < NH; ++h) {
    const std::int64_t g = h / (NH / NKV);
    for (std::int64_t t = 0; t < T; ++t) {
      Vec p(static_cast<std::size_t>(t + 1));
      double max = -1e300;
      for (std::int64_t s = 0; s <= t; ++s) {
        double dot = 0;
        for (std::int64_t d = 0; d < hd; ++d)
          dot += q[static_cast<std::size_t>((t * NH + h) * hd + d)] * k[static_cast<std::size_t>((s * NKV + g) * hd + d)];
        p[static_cast<std::size_t>(s)] = dot * scale;
        max = std::max(max, dot * scale);
      }
      double z = 0;
      for (auto& e : p) z += (e = std::exp(e - max));
      for (std::int64_t s = 0; s <= t; ++s)
        for (std::int64_t d = 0; d < hd; ++d)
          out[static_cast<std::size_t>((t * NH + h) * hd + d)] +=
              p[static_cast<std::size_t>(s)] / z * v[static_cast<std::size_t>((s * NKV + g) * hd + d)];
    }
  }
  return out;
}

// transformers' default and llama3 inverse frequencies of the rotary embedding.
inline Vec rope_inverse_frequencies(const nlohmann::json& c, std::int64_t hd) {
  const nlohmann::json rope = c.contains("rope_parameters") ? c["rope_parameters"]
                              : c.value("rope_scaling", nlohmann::json()).is_null()
                                  ? nlohmann::json::object()
                                  : c["rope_scaling"];
  const double theta = rope.contains("rope_theta") ? rope["rope_theta"].get<double>() : c.value("rope_theta", 10000.0);
  Vec inv(static_cast<std::size_t>(hd / 2));
  for (std::int64_t i = 0; i < hd / 2; ++i)
    inv[static_cast<std::size_t>(i)] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(hd));
  if (rope.value("rope_type", std::string("default")) != "llama3") return inv;
  const double factor = rope["factor"], low = rope["low_freq_factor"], high = rope["high_freq_factor"];
  const double old_len = rope["original_max_position_embeddings"];
  for (auto& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > old_len / low) {
      f /= factor;
    } else if (wavelen >= old_len / high) {
      const double smooth = (old_len / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }
  }
  return inv;
}

// Rotate-half rotary embedding of x (T, heads*hd) in place, positions 0..T-1.
inline void rope(Vec& x, const Vec& inv, std::int64_t T, std::int64_t heads, std::int64_t hd) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < hd / 2; ++i) {
        const double a = static_cast<double>(t) * inv[static_cast<std::size_t>(i)];
        auto& x1 = x[static_cast<std::size_t>((t * heads + h) * hd + i)];
        auto& x2 = x[static_cast<std::size_t>((t * heads + h) * hd + i + hd / 2)];
        const double r1 = x1 * std::cos(a) - x2 * std::sin(a), r2 = x2 * std::cos(a) + x1 * std::sin(a);
        x1 = r1;
        x2 = r2;
      }
}

inline void add(Vec& h, const Vec& d) {
  for (std::size_t i = 0; i < h.size(); ++i) h[i] += d[i];
}

// One sequence's final hidden states (T, C) -> logits (T, V) appended to `out`.
inline void head(const Vec& hn, const HfTensor& w, std::int64_t T, Vec& out) {
  const Vec l = linear(hn, w, T);
  out.insert(out.end(), l.begin(), l.end());
}

inline Vec llama_sequence(const nlohmann::json& c, const std::vector<HfTensor>& t, const std::int32_t* ids,
                          std::int64_t T) {
  const std::int64_t C = c["hidden_size"], L = c["num_hidden_layers"], NH = c["num_attention_heads"],
                     NKV = c["num_key_value_heads"], hd = C / NH;
  const double eps = c["rms_norm_eps"];
  const Vec inv = rope_inverse_frequencies(c, hd);
  const HfTensor& embed = hf_tensor(t, "model.embed_tokens.weight");
  Vec h(static_cast<std::size_t>(T * C));
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = 0; j < C; ++j)
      h[static_cast<std::size_t>(i * C + j)] = embed.values[static_cast<std::size_t>(ids[i] * C + j)];
  for (std::int64_t b = 0; b < L; ++b) {
    const std::string p = "model.layers." + std::to_string(b) + ".";
    const Vec n = rmsnorm(h, hf_tensor(t, p + "input_layernorm.weight"), T, C, eps);
    Vec q = linear(n, hf_tensor(t, p + "self_attn.q_proj.weight"), T);
    Vec k = linear(n, hf_tensor(t, p + "self_attn.k_proj.weight"), T);
    const Vec v = linear(n, hf_tensor(t, p + "self_attn.v_proj.weight"), T);
    rope(q, inv, T, NH, hd);
    rope(k, inv, T, NKV, hd);
    add(h, linear(attention(q, k, v, T, NH, NKV, hd), hf_tensor(t, p + "self_attn.o_proj.weight"), T));
    const Vec m = rmsnorm(h, hf_tensor(t, p + "post_attention_layernorm.weight"), T, C, eps);
    Vec gate = linear(m, hf_tensor(t, p + "mlp.gate_proj.weight"), T);
    const Vec up = linear(m, hf_tensor(t, p + "mlp.up_proj.weight"), T);
    for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    add(h, linear(gate, hf_tensor(t, p + "mlp.down_proj.weight"), T));
  }
  Vec out;
  const bool tied = c.value("tie_word_embeddings", false);
  head(rmsnorm(h, hf_tensor(t, "model.norm.weight"), T, C, eps), hf_tensor(t, tied ? "model.embed_tokens.weight" : "lm_head.weight"),
       T, out);
  return out;
}

inline Vec gpt2_sequence(const nlohmann::json& c, const std::vector<HfTensor>& t, const std::int32_t* ids,
                         std::int64_t T, const std::string& prefix) {
  const std::int64_t C = c["n_embd"], L = c["n_layer"], NH = c["n_head"], hd = C / NH;
  const double eps = c.value("layer_norm_epsilon", 1e-5);
  const HfTensor &wte = hf_tensor(t, prefix + "wte.weight"), &wpe = hf_tensor(t, prefix + "wpe.weight");
  Vec h(static_cast<std::size_t>(T * C));
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = 0; j < C; ++j)
      h[static_cast<std::size_t>(i * C + j)] =
          static_cast<double>(wte.values[static_cast<std::size_t>(ids[i] * C + j)]) + wpe.values[static_cast<std::size_t>(i * C + j)];
  for (std::int64_t b = 0; b < L; ++b) {
    const std::string p = prefix + "h." + std::to_string(b) + ".";
    auto w = [&](const std::string& name) -> const HfTensor& { return hf_tensor(t, p + name); };
    const Vec a = layernorm(h, w("ln_1.weight"), w("ln_1.bias"), T, C, eps);
    const Vec qkv = conv1d(a, w("attn.c_attn.weight"), w("attn.c_attn.bias"), T);
    Vec q(static_cast<std::size_t>(T * C)), k(q.size()), v(q.size());
    for (std::int64_t i = 0; i < T; ++i)
      for (std::int64_t j = 0; j < C; ++j) {
        q[static_cast<std::size_t>(i * C + j)] = qkv[static_cast<std::size_t>(i * 3 * C + j)];
        k[static_cast<std::size_t>(i * C + j)] = qkv[static_cast<std::size_t>(i * 3 * C + C + j)];
        v[static_cast<std::size_t>(i * C + j)] = qkv[static_cast<std::size_t>(i * 3 * C + 2 * C + j)];
      }
    add(h, conv1d(attention(q, k, v, T, NH, NH, hd), w("attn.c_proj.weight"), w("attn.c_proj.bias"), T));
    Vec f = conv1d(layernorm(h, w("ln_2.weight"), w("ln_2.bias"), T, C, eps), w("mlp.c_fc.weight"), w("mlp.c_fc.bias"), T);
    for (auto& x : f) x = 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    add(h, conv1d(f, w("mlp.c_proj.weight"), w("mlp.c_proj.bias"), T));
  }
  Vec out;
  head(layernorm(h, hf_tensor(t, prefix + "ln_f.weight"), hf_tensor(t, prefix + "ln_f.bias"), T, C, eps), wte, T, out);
  return out;
}

}  // namespace hf_reference_detail

/// The model of config.json `c` with tensors `t` on token rows `tokens` (B rows of T + 1
/// ids, row-major): logits of the first T of each row and the loss against the next.
inline HfReferenceOutput hf_reference_forward(const nlohmann::json& c, const std::vector<HfTensor>& t,
                                              const std::vector<std::int32_t>& tokens, std::int64_t B,
                                              const std::string& gpt2_prefix = "transformer.") {
  namespace d = hf_reference_detail;
  const std::int64_t T = static_cast<std::int64_t>(tokens.size()) / B - 1;
  const bool llama = c["architectures"][0] == "LlamaForCausalLM";
  HfReferenceOutput out;
  double loss = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int32_t* row = tokens.data() + b * (T + 1);
    const d::Vec l = llama ? d::llama_sequence(c, t, row, T) : d::gpt2_sequence(c, t, row, T, gpt2_prefix);
    const std::int64_t V = static_cast<std::int64_t>(l.size()) / T;
    for (std::int64_t i = 0; i < T; ++i) {
      const double* r = l.data() + i * V;
      double max = r[0], z = 0;
      for (std::int64_t v = 1; v < V; ++v) max = std::max(max, r[v]);
      for (std::int64_t v = 0; v < V; ++v) z += std::exp(r[v] - max);
      loss += max + std::log(z) - r[row[i + 1]];
    }
    out.logits.insert(out.logits.end(), l.begin(), l.end());
  }
  out.loss = loss / static_cast<double>(B * T);
  return out;
}

}  // namespace conveyor::testing
