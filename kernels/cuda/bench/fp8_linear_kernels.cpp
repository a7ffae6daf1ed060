// The blocks' linear layers in FP8 (precision.matmul fp8, stage_linears.hpp) at one model's
// shapes (kernel_rows.hpp): each layer's three FP8 GEMMs, and the casts that feed them
// (dynamic: amax, scale and cast; delayed: one pass). Shown beside the bf16 rows, counted
// in no step sum (launches_per_step 0): what FP8 would change, kernel by kernel. Their
// share of the ceiling is against the bf16 one, so an FP8 GEMM may show above 100%.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/bench/kernel_rows.hpp"
#include "kernels/cuda/fp8_delayed_scale.hpp"
#include "kernels/cuda/fp8_gemm.hpp"
#include "kernels/cuda/fp8_quantize.hpp"

namespace conveyor::kernel_bench {
namespace {

struct Linear {
  std::string name;
  int in, out;
};

std::vector<Linear> block_linears(const GptConfig& m) {
  const int C = static_cast<int>(m.d_model);
  if (m.arch == ModelArch::llama) {
    const int W = static_cast<int>((m.heads + 2 * m.kv_head_count()) * m.head_dim()),
              F = static_cast<int>(m.llama_ffn_dim());
    return {{"qkv", C, W}, {"o", C, C}, {"gate_up", C, 2 * F}, {"down", F, C}};
  }
  const int H = static_cast<int>(m.mlp_hidden());
  return {{"qkv", C, 3 * C}, {"proj", C, C}, {"fc1", C, H}, {"fc2", H, C}};
}

}  // namespace

void add_fp8_linear_kernels(KernelRows& k, const GptConfig& m, int B) {
  const int N = B * static_cast<int>(m.seq_len);
  const int device = current_device();
  const cudaStream_t stream = k.stream();
  for (const Linear& l : block_linears(m)) {
    const double flops = 2.0 * N * l.in * l.out;
    auto x = k.bf16(std::size_t(N) * l.in), dy = k.bf16(std::size_t(N) * l.out, 0.01f);
    auto w = k.bf16(std::size_t(l.out) * l.in, 0.02f), dw = k.f32(std::size_t(l.out) * l.in, 0.01f);
    auto y = k.bf16(std::size_t(N) * l.out), dx = k.bf16(std::size_t(N) * l.in);
    const Fp8Tensor xq(x.as<bf16>(), N, l.in, Fp8Kind::e4m3, Fp8Copies::both, device, stream, "x");
    const Fp8Tensor wq(w.as<bf16>(), l.out, l.in, Fp8Kind::e4m3, Fp8Copies::both, device, stream,
                       "w");
    const Fp8Tensor dq(dy.as<bf16>(), N, l.out, Fp8Kind::e5m2, Fp8Copies::both, device, stream,
                       "dy");
    const std::string at = " (" + std::to_string(l.in) + " -> " + std::to_string(l.out) + ")";
    k.add("fp8 gemm " + l.name + " forward" + at, "fp8", 0, flops, 0, [&] {
      fp8_linear_forward(y.as<bf16>(), xq.operand(), wq.operand(), nullptr, N, l.in, l.out, stream);
    });
    k.add("fp8 gemm " + l.name + " backward input" + at, "fp8", 0, flops, 0, [&] {
      fp8_linear_backward_input(dx.as<bf16>(), dq.operand(), wq.transposed(), N, l.in, l.out,
                                stream);
    });
    k.add("fp8 gemm " + l.name + " backward weight (+= fp32)" + at, "fp8", 0, flops, 0, [&] {
      fp8_linear_backward_weight(dw.as<float>(), dq.transposed(), xq.transposed(), N, l.in, l.out,
                                 stream);
    });
    // A cast reads the bf16 tensor and writes a byte per element and copy; the dynamic one
    // reads it twice (its amax first).
    const double elems = double(N) * l.in;
    k.add("fp8 cast, dynamic (amax, scale, cast)" + at, "fp8", 0, 0, elems * 5, [&] {
      const Fp8Tensor q(x.as<bf16>(), N, l.in, Fp8Kind::e4m3, Fp8Copies::rows, device, stream, "x");
    });
    k.add("fp8 cast-transpose, dynamic" + at, "fp8", 0, 0, elems * 5, [&] {
      const Fp8Tensor q(x.as<bf16>(), N, l.in, Fp8Kind::e4m3, Fp8Copies::transposed, device, stream,
                        "x");
    });
    DelayedScale slot(16, Fp8Kind::e4m3, device, stream);
    { const Fp8Tensor first(x.as<bf16>(), N, l.in, slot, Fp8Copies::rows, device, stream, "x"); }
    slot.roll(stream);
    k.add("fp8 cast, delayed (one pass)" + at, "fp8", 0, 0, elems * 3, [&] {
      const Fp8Tensor q(x.as<bf16>(), N, l.in, slot, Fp8Copies::rows, device, stream, "x");
    });
  }
}

}  // namespace conveyor::kernel_bench
