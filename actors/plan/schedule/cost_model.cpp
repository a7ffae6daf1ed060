#include "actors/plan/schedule/cost_model.hpp"

#include <algorithm>
#include <cstdio>

#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

constexpr double kFloat = 4.0;           // bytes of an f32 (and of an i32 token id)
constexpr double kStateCopies = 4.0;     // value, gradient, AdamW m, AdamW v

struct Shape {
  double N, T, C, V, NH;  // tokens per micro-batch, context, width, vocab, heads
  bool llama;
  double W, F;            // Llama: the qkv width (NH + 2 NKV) hs, the SwiGLU width
};

Shape shape_of(const GptConfig& c, std::int64_t micro_batch_size) {
  const bool llama = c.arch == ModelArch::llama;
  return {static_cast<double>(micro_batch_size * c.seq_len),
          static_cast<double>(c.seq_len),
          static_cast<double>(c.d_model),
          static_cast<double>(c.vocab),
          static_cast<double>(c.heads),
          llama,
          llama ? static_cast<double>(c.d_model + 2 * c.kv_head_count() * c.head_dim()) : 0.0,
          llama ? static_cast<double>(c.llama_ffn_dim()) : 0.0};
}

// Weights of a block's matmuls (a multiply-add per token each): GPT-2 qkv + proj 4C², fc1 +
// fc2 8C²; Llama qkv + o (W + C)·C, gate_up + down 3·F·C.
double attention_matmul_weights(const Shape& s) {
  return s.llama ? (s.W + s.C) * s.C : 4.0 * s.C * s.C;
}
double mlp_matmul_weights(const Shape& s) { return s.llama ? 3.0 * s.F * s.C : 8.0 * s.C * s.C; }

// One action of one unit: its matmul FLOPs, element-wise elements moved, kernel launches.
struct Work {
  double flops = 0.0;
  double elements = 0.0;
  double launches = 0.0;
};

double seconds_us(const Work& w, const DeviceThroughput& d) {
  return 1e6 * (w.flops / d.flops_per_s + w.elements * kFloat / d.bytes_per_s) + w.launches * d.launch_us;
}

std::string describe(const DeviceThroughput& d) {
  char buf[160];
  if (d.launch_us > 0) {
    std::snprintf(buf, sizeof buf, "%.4g TFLOP/s effective, %.3g TB/s and %.3g us per kernel launch",
                  d.flops_per_s / 1e12, d.bytes_per_s / 1e12, d.launch_us);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g GFLOP/s and %.3g GB/s", d.flops_per_s / 1e9, d.bytes_per_s / 1e9);
  }
  return buf;
}

}  // namespace

DeviceThroughput assumed_throughput(const std::string& kind, int threads) {
  if (threads < 1) throw InputError("cost model: threads must be >= 1, got " + std::to_string(threads));
  DeviceThroughput d;
  d.kind = kind;
  if (kind == "cuda") {
    d.flops_per_s = 400e12;  // bf16 tensor cores, effective (not peak) on a Hopper GPU
    d.bytes_per_s = 3e12;
    d.launch_us = 5.0;
    d.description = "assumed " + describe(d) + " (bf16 matmuls on one GPU)";
  } else if (kind == "cpu") {
    d.flops_per_s = 20e9 * threads;  // per core, single-precision kernels
    d.bytes_per_s = 10e9 * threads;
    d.description = "assumed " + describe(d) + " (" + std::to_string(threads) + " CPU core" +
                    (threads > 1 ? "s" : "") + ")";
  } else {
    throw InputError("cost model: unknown device kind '" + kind + "' (known: cpu, cuda)");
  }
  return d;
}

UnitCost unit_memory_embedding(const GptConfig& c, std::int64_t micro_batch_size) {
  const Shape s = shape_of(c, micro_batch_size);
  UnitCost u;
  u.activation_bytes = s.N * (1.0 + s.C) * kFloat;  // tokens, then the gradient of the output
  // wte, and GPT-2's wpe
  u.param_bytes = (s.V + (s.llama ? 0.0 : s.T)) * s.C * kFloat * kStateCopies;
  return u;
}

UnitCost unit_memory_attention_half(const GptConfig& c, std::int64_t micro_batch_size) {
  const Shape s = shape_of(c, micro_batch_size);
  UnitCost u;
  // Floats per token held after forward: x, ln1 and its two statistics, qkv, the
  // probabilities, atty (less what model.recompute attention drops: all but x); after
  // backward_input: x, ln1, its statistics, atty, d_res2, d_qkv, d_ln1.
  // Llama (llama_layers.hpp): x, the norm and its statistic, qkv (W), the probabilities,
  // atty; after backward_input x, the norm, its statistic, atty, d_out, d_qkv (W), d_xn.
  if (s.llama) {
    double after_forward = 3.0 * s.C + s.W + s.NH * s.T + 1.0;
    if (recomputes_attention(c.recompute)) after_forward = s.C;
    u.activation_bytes = s.N * std::max(after_forward, 5.0 * s.C + s.W + 1.0) * kFloat;
    u.param_bytes = (attention_matmul_weights(s) + s.C) * kFloat * kStateCopies;  // norm, qkv, o
    return u;
  }
  double after_forward = 6.0 * s.C + s.NH * s.T + 2.0;
  if (recomputes_attention(c.recompute)) after_forward -= 5.0 * s.C + 2.0 + s.NH * s.T;
  u.activation_bytes = s.N * std::max(after_forward, 8.0 * s.C + 2.0) * kFloat;
  u.param_bytes = (4.0 * s.C * s.C + 6.0 * s.C) * kFloat * kStateCopies;  // ln1, qkv, proj
  return u;
}

UnitCost unit_memory_mlp_half(const GptConfig& c, std::int64_t micro_batch_size) {
  const Shape s = shape_of(c, micro_batch_size);
  UnitCost u;
  // After forward: res2, ln2 and its statistics, fc1, GELU (model.recompute full drops them
  // all; a slice that starts at this half keeps res2, its input, which is not counted);
  // after backward_input: res2, ln2, its statistics, GELU, d_out, d_fc1, d_ln2.
  // Llama: x, the norm and its statistic, gate_up (2F), SwiGLU's output (F); after
  // backward_input x, the norm, its statistic, h, d_out, d_gate_up (2F), d_xn.
  if (s.llama) {
    double after_forward = 2.0 * s.C + 3.0 * s.F + 1.0;
    if (recomputes_mlp(c.recompute)) after_forward = s.C;
    u.activation_bytes = s.N * std::max(after_forward, 4.0 * s.C + 3.0 * s.F + 1.0) * kFloat;
    u.param_bytes = (mlp_matmul_weights(s) + s.C) * kFloat * kStateCopies;  // norm, gate_up, down
    return u;
  }
  double after_forward = 10.0 * s.C + 2.0;
  if (recomputes_mlp(c.recompute)) after_forward = 0.0;
  u.activation_bytes = s.N * std::max(after_forward, 12.0 * s.C + 2.0) * kFloat;
  u.param_bytes = (8.0 * s.C * s.C + 7.0 * s.C) * kFloat * kStateCopies;  // ln2, fc1, fc2
  return u;
}

UnitCost unit_memory_head(const GptConfig& c, std::int64_t micro_batch_size) {
  const Shape s = shape_of(c, micro_batch_size);
  UnitCost u;
  // targets, x, the norm's output and statistics (LayerNorm's two, RMSNorm's one), the
  // logits, the norm's output gradient
  u.activation_bytes = s.N * (3.0 * s.C + (s.llama ? 2.0 : 3.0) + s.V) * kFloat;
  // the final norm (GPT-2's with a bias) and lm_head
  u.param_bytes = (s.V * s.C + (s.llama ? 1.0 : 2.0) * s.C) * kFloat * kStateCopies;
  return u;
}

ModelCosts model_costs(const GptConfig& c, std::int64_t micro_batch_size, const DeviceThroughput& d) {
  if (micro_batch_size < 1) {
    throw InputError("cost model: micro_batch_size must be >= 1, got " + std::to_string(micro_batch_size));
  }
  const Shape s = shape_of(c, micro_batch_size);
  const double N = s.N, T = s.T, C = s.C, V = s.V, NH = s.NH;
  // The MLP's element-wise width: GPT-2's GELU over H = 4C, Llama's SwiGLU reading 2F and
  // writing F.
  const double H = s.llama ? 1.5 * s.F : 4.0 * s.C;
  const double attn_mm = 2.0 * N * attention_matmul_weights(s), mlp_mm = 2.0 * N * mlp_matmul_weights(s);
  const auto timed = [&](UnitCost u, const Work& f, const Work& i, const Work& w) {
    u.f_us = seconds_us(f, d);
    u.i_us = seconds_us(i, d);
    u.w_us = seconds_us(w, d);
    return u;
  };

  // embedding: F reads a wte and a wpe row and writes the sum; W scatter-adds into both.
  const UnitCost embedding = timed(unit_memory_embedding(c, micro_batch_size), {0.0, 3.0 * N * C, 1.0},
                                   {0.0, 0.0, 0.0}, {0.0, 5.0 * N * C, 1.0});
  // attention half: qkv (3C²) and proj (C²) weights and the attention; element-wise per
  // token a LayerNorm (2C), a residual (3C) and the softmax over the scores (3·NH·T); the
  // backward moves about twice that; W reads the gradients for the biases and ln1.
  const double attention_elementwise = N * (2.0 * C + 3.0 * C + 3.0 * NH * T);
  const UnitCost attention = timed(
      unit_memory_attention_half(c, micro_batch_size),
      {attn_mm + 4.0 * N * T * C, attention_elementwise, 6.0},
      {attn_mm + 8.0 * N * T * C, 2.0 * attention_elementwise, 6.0},
      {attn_mm, N * (3.0 * C + 3.0 * C), 3.0});
  // MLP half: fc1 and fc2 (4C² each); a LayerNorm, a residual and GELU (2H) per token.
  const double mlp_elementwise = N * (2.0 * C + 3.0 * C + 2.0 * H);
  const UnitCost mlp = timed(unit_memory_mlp_half(c, micro_batch_size),
                             {mlp_mm, mlp_elementwise, 6.0},
                             {mlp_mm, 2.0 * mlp_elementwise, 6.0},
                             {mlp_mm, N * (6.0 * C + 5.0 * C), 3.0});
  // head: ln_f, the logits, softmax and cross-entropy over V per token.
  const UnitCost head = timed(unit_memory_head(c, micro_batch_size), {2.0 * N * C * V, N * (2.0 * C + 3.0 * V), 3.0},
                              {2.0 * N * C * V, N * (3.0 * C + 2.0 * V), 3.0},
                              {2.0 * N * C * V, N * 2.0 * C, 2.0});

  ModelCosts costs;
  costs.units.push_back(embedding);
  for (std::int64_t b = 0; b < c.layers; ++b) {
    costs.units.push_back(attention);
    costs.units.push_back(mlp);
  }
  costs.units.push_back(head);
  costs.source = "from the cost model, estimated, not measured: FLOPs and bytes at an " + d.description;
  return costs;
}

}  // namespace conveyor::sched
