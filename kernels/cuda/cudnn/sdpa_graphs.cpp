#if CONVEYOR_WITH_CUDNN
#include "kernels/cuda/cudnn/sdpa_graphs.hpp"

#include <cmath>
#include <limits>

namespace conveyor::cudnn {
namespace {

constexpr cudnnDataType_t kBf16 = CUDNN_DATA_BFLOAT16;
constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;

Dims bhtd(const SdpaShape& s) { return {s.B, s.H, s.T, s.D}; }
Dims bhtt(const SdpaShape& s) { return {s.B, s.H, s.T, s.T}; }
Dims bht1(const SdpaShape& s) { return {s.B, s.H, s.T, 1}; }
Dims kv_dims(const SdpaShape& s) { return {s.B, s.Hkv, s.T, s.D}; }
Dims kv_transposed_dims(const SdpaShape& s) { return {s.B, s.Hkv, s.D, s.T}; }
std::int64_t width(const SdpaShape& s) { return s.H * s.D; }  // C
std::int64_t row_width(const SdpaShape& s) { return (s.H + 2 * s.Hkv) * s.D; }  // W
// Q, V, dQ, dK, dV inside (B, T, W), as (B, heads, T, D).
Dims qkv_strides(const SdpaShape& s) {
  return {s.T * row_width(s), s.D, row_width(s), 1};
}
// K^T, V^T inside (B, T, W), as (B, Hkv, D, T).
Dims qkv_transposed_strides(const SdpaShape& s) {
  return {s.T * row_width(s), s.D, 1, row_width(s)};
}
bool grouped(const SdpaShape& s) { return s.Hkv != s.H; }
// O, dO in (B, T, C), as (B, H, T, D).
Dims out_strides(const SdpaShape& s) { return {s.T * width(s), s.D, width(s), 1}; }
// A row-major (B, H, Tq, Tk) score matrix viewed as (B, H, Tk, Tq).
Dims scores_transposed_strides(const SdpaShape& s) { return {s.H * s.T * s.T, s.T * s.T, 1, s.T}; }

float attention_scale(const SdpaShape& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.D));  // as conveyor's kernels
}

// Causal (top-left) mask: keeps (row >= col), else the lowest float, whose exp is 0.
GraphTensor causal_mask(OpGraphBuilder& g, const GraphTensor& scores) {
  // GEN_INDEX gives each element's coordinate along an axis (2: query row, 3: key column);
  // its index math in fp32 is what the verified graphs use.
  const GraphTensor row = g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr,
                                      CUDNN_DATA_INT32, "row index", kF32, 2);
  const GraphTensor col = g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr,
                                      CUDNN_DATA_INT32, "column index", kF32, 3);
  const GraphTensor keep = g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr,
                                       CUDNN_DATA_BOOLEAN, "row >= column", CUDNN_DATA_BOOLEAN);
  const GraphTensor lowest = g.scalar(std::numeric_limits<float>::lowest(), "masked score");
  // BINARY_SELECT: y = t ? x : b.
  return g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, &lowest, &keep, kF32,
                     "masked scores");
}

// Heuristics, engine choice and plan for a finalized graph.
std::unique_ptr<SdpaPlan> plan_graph(cudnnHandle_t handle, std::unique_ptr<SdpaPlan> p) {
  p->op_graph = p->graph.finalize(handle);
  p->plan = deterministic_execution_plan(handle, p->op_graph);
  return p;
}

}  // namespace

std::unique_ptr<SdpaPlan> build_sdpa_forward(cudnnHandle_t handle, const SdpaShape& s) {
  auto p = std::make_unique<SdpaPlan>("sdpa forward");
  OpGraphBuilder& g = p->graph;
  const GraphTensor q = g.io(kSdpaQ, bhtd(s), qkv_strides(s), kBf16, "Q");
  const GraphTensor kt =
      g.io(kSdpaK, kv_transposed_dims(s), qkv_transposed_strides(s), kBf16, "K^T");
  const GraphTensor v = g.io(kSdpaV, kv_dims(s), qkv_strides(s), kBf16, "V");
  const GraphTensor o = g.io(kSdpaO, bhtd(s), out_strides(s), kBf16, "O");
  const GraphTensor stats = g.io(kSdpaStats, bht1(s), packed_strides(bht1(s)), kF32, "Stats");
  const GraphTensor scale = g.scalar(attention_scale(s), "scale");

  const GraphTensor raw = g.matmul(q, kt, "S = Q K^T");
  const GraphTensor scaled = g.binary(CUDNN_POINTWISE_MUL, raw, scale, "S * scale");
  const GraphTensor masked = causal_mask(g, scaled);
  // Softmax with its statistics, as cudnn-frontend composes it.
  const GraphTensor m = g.row_reduction(CUDNN_REDUCE_TENSOR_MAX, masked, "row max m");
  const GraphTensor shifted = g.binary(CUDNN_POINTWISE_SUB, masked, m, "S - m");
  const GraphTensor e = g.unary(CUDNN_POINTWISE_EXP, shifted, "exp(S - m)");
  const GraphTensor z = g.row_reduction(CUDNN_REDUCE_TENSOR_ADD, e, "row sum z");
  const GraphTensor log_z = g.unary(CUDNN_POINTWISE_LOG, z, "log z");
  g.pointwise_into(CUDNN_POINTWISE_ADD, stats, m, &log_z);  // stats = m + log z
  // P in bf16: the engine wants the second product's A operand in the i/o type.
  const GraphTensor probs = g.binary(CUDNN_POINTWISE_DIV, e, z, "P", kBf16);
  g.matmul_into(probs, v, o);
  return plan_graph(handle, std::move(p));
}

std::unique_ptr<SdpaPlan> build_sdpa_backward(cudnnHandle_t handle, const SdpaShape& s) {
  auto p = std::make_unique<SdpaPlan>("sdpa backward");
  OpGraphBuilder& g = p->graph;
  const GraphTensor q = g.io(kSdpaQ, bhtd(s), qkv_strides(s), kBf16, "Q");
  const GraphTensor kt =
      g.io(kSdpaK, kv_transposed_dims(s), qkv_transposed_strides(s), kBf16, "K^T");
  const GraphTensor vt =
      g.io(kSdpaV, kv_transposed_dims(s), qkv_transposed_strides(s), kBf16, "V^T");
  const GraphTensor o = g.io(kSdpaO, bhtd(s), out_strides(s), kBf16, "O");
  const GraphTensor dout = g.io(kSdpaDout, bhtd(s), out_strides(s), kBf16, "dO");
  const GraphTensor stats = g.io(kSdpaStats, bht1(s), packed_strides(bht1(s)), kF32, "Stats");
  const GraphTensor dq = g.io(kSdpaDq, bhtd(s), qkv_strides(s), kBf16, "dQ");
  const GraphTensor dk = g.io(kSdpaDk, kv_dims(s), qkv_strides(s), kBf16, "dK");
  const GraphTensor dv = g.io(kSdpaDv, kv_dims(s), qkv_strides(s), kBf16, "dV");
  // c = a @ b into `out`; grouped: per query head into a bf16 virtual tensor, then summed
  // over each group of query heads into `out` (Hkv heads).
  auto kv_gradient = [&](const GraphTensor& a, const GraphTensor& b, const GraphTensor& out,
                         const char* per_head) {
    if (!grouped(s)) return g.matmul_into(a, b, out);
    const GraphTensor full = g.matmul(a, b, per_head, kBf16);
    g.reduction_into(CUDNN_REDUCE_TENSOR_ADD, full, out);
  };
  const GraphTensor scale = g.scalar(attention_scale(s), "scale");
  const GraphTensor one = g.scalar(1.0f, "dropout scale");  // the frontend's slot; no dropout

  // softmax_sum = rowsum(dO * O): the softmax backward's correction term.
  const GraphTensor dout_o = g.binary(CUDNN_POINTWISE_MUL, dout, o, "dO * O");
  const GraphTensor row_sum = g.row_reduction(CUDNN_REDUCE_TENSOR_ADD, dout_o, "rowsum(dO * O)");
  const GraphTensor softmax_sum =
      g.io(kSdpaSoftmaxSum, bht1(s), packed_strides(bht1(s)), kF32, "softmax_sum");
  g.pointwise_into(CUDNN_POINTWISE_MUL, softmax_sum, row_sum, &one);

  // P = exp(scale * Q K^T - stats), masked after the subtraction.
  const GraphTensor raw = g.matmul(q, kt, "S = Q K^T");
  const GraphTensor scaled = g.binary(CUDNN_POINTWISE_MUL, raw, scale, "S * scale");
  const GraphTensor centred = g.binary(CUDNN_POINTWISE_SUB, scaled, stats, "S - stats");
  const GraphTensor masked = causal_mask(g, centred);
  const GraphTensor probs = g.unary(CUDNN_POINTWISE_EXP, masked, "P");

  // dV = P^T dO (P^T: a transposing reshape to bf16).
  const GraphTensor probs_t = g.virtual_tensor(bhtt(s), scores_transposed_strides(s), kBf16, "P^T");
  g.reshape_into(probs, probs_t);
  kv_gradient(probs_t, dout, dv, "dV per query head");

  // dP = dO V^T; dS = P * (dP - softmax_sum) * scale.
  const GraphTensor dp = g.matmul(dout, vt, "dP = dO V^T");
  const GraphTensor dp_centred = g.binary(CUDNN_POINTWISE_SUB, dp, softmax_sum, "dP - softmax_sum");
  const GraphTensor dp_probs = g.binary(CUDNN_POINTWISE_MUL, dp_centred, probs, "P * (dP - sum)");
  const GraphTensor ds = g.binary(CUDNN_POINTWISE_MUL, dp_probs, scale, "dS");

  // dK = dS^T Q.
  const GraphTensor ds_t = g.virtual_tensor(bhtt(s), scores_transposed_strides(s), kBf16, "dS^T");
  g.reshape_into(ds, ds_t);
  kv_gradient(ds_t, q, dk, "dK per query head");

  // dQ = dS K, written directly (the deterministic form). K comes back from K^T through a
  // reshape to an fp32 virtual tensor, as the frontend does.
  const Dims kts = qkv_transposed_strides(s);
  const GraphTensor k =
      g.virtual_tensor(kv_dims(s), {kts[0], kts[1], kts[3], kts[2]}, kF32, "K");
  g.reshape_into(kt, k);
  g.matmul_into(ds, k, dq);
  return plan_graph(handle, std::move(p));
}

}  // namespace conveyor::cudnn
#endif  // CONVEYOR_WITH_CUDNN
