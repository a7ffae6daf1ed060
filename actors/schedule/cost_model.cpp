#include "actors/schedule/cost_model.hpp"

#include <algorithm>
#include <cstdio>

#include "kernels/common/error.hpp"

namespace conveyor::sched {
namespace {

constexpr double kFloat = 4.0;           // bytes of an f32 (and of an i32 token id)
constexpr double kStateCopies = 4.0;     // value, gradient, AdamW m, AdamW v

struct Shape {
  double N, T, C, V, NH;  // tokens per micro-batch, context, width, vocab, heads
};

Shape shape_of(const GptConfig& c, std::int64_t micro_batch_size) {
  return {static_cast<double>(micro_batch_size * c.seq_len), static_cast<double>(c.seq_len),
          static_cast<double>(c.d_model), static_cast<double>(c.vocab), static_cast<double>(c.heads)};
}

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
  u.param_bytes = (s.V + s.T) * s.C * kFloat * kStateCopies;
  return u;
}

UnitCost unit_memory_block(const GptConfig& c, std::int64_t micro_batch_size) {
  const Shape s = shape_of(c, micro_batch_size);
  UnitCost u;
  // Floats per token held after forward (less what model.recompute drops: ln1, its two
  // statistics, qkv, the probabilities and atty; then res2, ln2, its statistics, fc1 and
  // GELU), and after backward_input (the same for every setting: recomputed by then).
  double after_forward = 16.0 * s.C + s.NH * s.T + 4.0;
  if (recomputes_attention(c.recompute)) after_forward -= 5.0 * s.C + 2.0 + s.NH * s.T;
  if (recomputes_mlp(c.recompute)) after_forward -= 10.0 * s.C + 2.0;
  u.activation_bytes = s.N * std::max(after_forward, 20.0 * s.C + 4.0) * kFloat;
  u.param_bytes = (12.0 * s.C * s.C + 13.0 * s.C) * kFloat * kStateCopies;
  return u;
}

UnitCost unit_memory_head(const GptConfig& c, std::int64_t micro_batch_size) {
  const Shape s = shape_of(c, micro_batch_size);
  UnitCost u;
  u.activation_bytes = s.N * (3.0 * s.C + 3.0 + s.V) * kFloat;
  u.param_bytes = (s.V * s.C + 2.0 * s.C) * kFloat * kStateCopies;
  return u;
}

ModelCosts model_costs(const GptConfig& c, std::int64_t micro_batch_size, const DeviceThroughput& d) {
  if (micro_batch_size < 1) {
    throw InputError("cost model: micro_batch_size must be >= 1, got " + std::to_string(micro_batch_size));
  }
  const Shape s = shape_of(c, micro_batch_size);
  const double N = s.N, T = s.T, C = s.C, V = s.V, H = 4.0 * s.C, NH = s.NH;
  const auto timed = [&](UnitCost u, const Work& f, const Work& i, const Work& w) {
    u.f_us = seconds_us(f, d);
    u.i_us = seconds_us(i, d);
    u.w_us = seconds_us(w, d);
    return u;
  };

  // embedding: F reads a wte and a wpe row and writes the sum; W scatter-adds into both.
  const UnitCost embedding = timed(unit_memory_embedding(c, micro_batch_size), {0.0, 3.0 * N * C, 1.0},
                                   {0.0, 0.0, 0.0}, {0.0, 5.0 * N * C, 1.0});
  // block: element-wise per token: 2 LayerNorms (2C each), 2 residuals (3C each), GELU
  // (2H), softmax over the scores (3·NH·T); the backward moves about twice that; W reads
  // the gradients for the biases and the LayerNorm weights.
  const double block_elementwise = N * (4.0 * C + 6.0 * C + 2.0 * H + 3.0 * NH * T);
  const UnitCost block =
      timed(unit_memory_block(c, micro_batch_size), {24.0 * N * C * C + 4.0 * N * T * C, block_elementwise, 12.0},
            {24.0 * N * C * C + 8.0 * N * T * C, 2.0 * block_elementwise, 12.0},
            {24.0 * N * C * C, N * (9.0 * C + 8.0 * C), 6.0});
  // head: ln_f, the logits, softmax and cross-entropy over V per token.
  const UnitCost head = timed(unit_memory_head(c, micro_batch_size), {2.0 * N * C * V, N * (2.0 * C + 3.0 * V), 3.0},
                              {2.0 * N * C * V, N * (3.0 * C + 2.0 * V), 3.0},
                              {2.0 * N * C * V, N * 2.0 * C, 2.0});

  ModelCosts costs;
  costs.units.push_back(embedding);
  for (std::int64_t b = 0; b < c.layers; ++b) costs.units.push_back(block);
  costs.units.push_back(head);
  costs.source = "from the cost model, estimated, not measured: FLOPs and bytes at an " + d.description;
  return costs;
}

}  // namespace conveyor::sched
