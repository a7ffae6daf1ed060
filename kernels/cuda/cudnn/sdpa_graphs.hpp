#pragma once
// cuDNN's fused flash attention (SDPA) as backend operation graphs, with conveyor's layouts
// (kernels/cuda/attention.hpp): causal, scale 1 / sqrt(D), bf16 in and out, fp32 math.
//
// cuDNN has no single "attention" operation: it matches a graph of matmuls, pointwise ops and
// reductions against its flash-attention engines. The graphs below are the ones cudnn-frontend
// (1.x, newest layout) emits for causal SDPA, as verified on an H200 with cuDNN 9.14 against
// a CPU reference and for bitwise determinism: forward with the mask's index math in fp32;
// backward in its deterministic form (dQ written directly, no fp32 dQ accumulator), the
// mask applied after S - stats, and softmax_sum = rowsum(dO * O) written to a buffer.
//
// Tensors (logical dims (B, H, T, D) for Q, O and their gradients, (B, Hkv, T, D) for K, V
// and theirs; memory as conveyor's, attention.hpp):
//   Q, K, V, dQ, dK, dV  inside qkv / dqkv (B, T, W), W = (H + 2 Hkv) D: row stride W, query
//                        head h at h*D, K at +H*D, V at +(H + Hkv)*D; K^T and V^T are the
//                        same memory with the last two strides swapped. Hkv = H is GPT-2's
//                        (B, T, 3C).
//   Grouped-query (Hkv < H): the products broadcast K and V over each group of H / Hkv query
//                        heads; the backward forms dK and dV per query head (bf16, virtual)
//                        and sums each group with a reduction node, as cudnn-frontend does.
//   O, dO                (B, T, C)
//   Stats                (B, H, T, 1) fp32: natural-log logsumexp of each row's scaled scores
//   softmax_sum          (B, H, T, 1) fp32 scratch of the backward
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "kernels/cuda/cudnn/execution_plan.hpp"
#include "kernels/cuda/cudnn/op_graph_builder.hpp"

namespace conveyor::cudnn {

struct SdpaShape {
  std::int64_t B, H, Hkv, T, D;  // batch, query heads, kv heads, sequence length, head size
};

/// Unique ids of the tensors a call binds (OpGraphBuilder::variant_pack).
enum SdpaUid : std::int64_t {
  kSdpaQ = 1,
  kSdpaK,
  kSdpaV,
  kSdpaO,
  kSdpaStats,
  kSdpaDout,
  kSdpaDq,
  kSdpaDk,
  kSdpaDv,
  kSdpaSoftmaxSum,
};

/// A graph and its plan, ready to execute. The graph owns the descriptors the plan reads.
struct SdpaPlan {
  explicit SdpaPlan(std::string name) : graph(std::move(name)) {}
  OpGraphBuilder graph;
  BackendDescriptor op_graph;
  ExecutionPlan plan;
};

/// out, stats <- Q, K, V. Throws CudaError when cuDNN cannot build or plan it (a shape or
/// head size its engines refuse, a missing sub-library, no deterministic engine).
std::unique_ptr<SdpaPlan> build_sdpa_forward(cudnnHandle_t handle, const SdpaShape& shape);

/// dQ, dK, dV (and softmax_sum) <- Q, K, V, O, dO, stats; deterministic. Throws as above.
std::unique_ptr<SdpaPlan> build_sdpa_backward(cudnnHandle_t handle, const SdpaShape& shape);

}  // namespace conveyor::cudnn
