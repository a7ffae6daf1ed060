#pragma once
// Layer costs from FLOPs and bytes, for planning on a machine that lacks the target device
// (a `devices.kind: cuda` config planned on a laptop). An estimate, not a measurement:
// explanations say so (ModelCosts::source).
//
// GPT-2 and Llama blocks (model.arch). Per micro-batch of N = B·T tokens, d_model C, vocab
// V, heads NH, hidden H = 4C, and a multiply-add counted as 2 FLOPs (GPT-2's figures; a
// Llama's have its own matmul weights in place of 4C² and 8C²: qkv and o (W + C)·C with
// W = (NH + 2 NKV)·hs, gate_up and down 3·F·C):
//   attention half F: 8·N·C² (qkv, proj) + 4·N·T·C (q·kᵀ and att·v over the full context,
//                     the causal mask ignored as in gpt_forward_flops_per_token)
//                  I: 8·N·C² + 8·N·T·C (the attention backward has no weights: all of it is I)
//                  W: 8·N·C²
//   MLP half       F, I, W: 16·N·C² each (fc1, fc2)
//   head   F: 2·N·C·V   I: 2·N·C·V   W: 2·N·C·V
//   embedding: lookups and scatter-adds only (no matmul FLOPs).
// Element-wise work (LayerNorm, GELU, softmax, residuals, cross-entropy, embedding lookups)
// is costed by the bytes it reads and writes at the device's memory bandwidth, and every
// kernel launch by a fixed overhead. time = FLOPs / flops_per_s + bytes / bytes_per_s +
// launches · launch_us.
//
// Memory follows the CPU GptStage's layers (kernels/model/gpt2_layers.hpp, and
// llama_layers.hpp for a Llama, whose per-token counts are there), f32 everywhere:
//   activations per token: attention half max(6C + NH·T + 2, 8C + 2) floats (after F, after
//   I), MLP half max(10C + 2, 12C + 2) (a block 16C + NH·T + 4 after F, 20C + 4 after I);
//   embedding 1 + C; head 3C + 3 + V (the tokens and targets are i32, 4 bytes too);
//   parameters: embedding (V + T)·C, attention half 4C² + 6C, MLP half 8C² + 7C, head
//   V·C + 2C, each ×16 bytes (value, gradient, AdamW m and v in f32).
// The layer profiler (actors/runtime/layer_profiler.hpp) measures the same memory on the CPU
// and its test checks that both agree.
// Pure logic: no CAF, no clock.
#include <cstdint>
#include <string>

#include "actors/plan/schedule/partitioner.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor::sched {

/// What the cost model assumes of a device.
struct DeviceThroughput {
  std::string kind;             // "cuda", "cpu"
  double flops_per_s = 0.0;     // matmul throughput, effective
  double bytes_per_s = 0.0;     // memory bandwidth for element-wise work
  double launch_us = 0.0;       // fixed cost per kernel
  std::string description;      // "400 TFLOP/s bf16 effective, 3.0 TB/s, 5 us per kernel"
};

/// cuda: 400 TFLOP/s (bf16, effective), 3 TB/s, 5 µs per kernel launch;
/// cpu: 20 GFLOP/s and 10 GB/s per core, times `threads`, no launch cost.
/// Throws InputError for another kind or threads < 1.
DeviceThroughput assumed_throughput(const std::string& device_kind, int threads = 1);

/// Costs of every unit (embedding, both halves of config.layers blocks, head) for one micro-batch of
/// `micro_batch_size` sequences of config.seq_len tokens. source says "cost model …".
ModelCosts model_costs(const GptConfig& config, std::int64_t micro_batch_size,
                       const DeviceThroughput& device);

/// Activation bytes one micro-batch holds in each unit, and parameter + optimizer bytes
/// (see the top of this file).
UnitCost unit_memory_embedding(const GptConfig& config, std::int64_t micro_batch_size);
UnitCost unit_memory_attention_half(const GptConfig& config, std::int64_t micro_batch_size);
UnitCost unit_memory_mlp_half(const GptConfig& config, std::int64_t micro_batch_size);
UnitCost unit_memory_head(const GptConfig& config, std::int64_t micro_batch_size);

}  // namespace conveyor::sched
