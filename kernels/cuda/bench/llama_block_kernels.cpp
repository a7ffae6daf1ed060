// Llama's block kernels at one model's shapes (kernel_rows.hpp), in the order the CUDA stage
// model launches them (llama_cuda_layers.cpp). W = (NH + 2 NKV) hs is the fused qkv width,
// F the SwiGLU width.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/rotary.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/bench/kernel_rows.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rotary.hpp"
#include "kernels/cuda/swiglu.hpp"

namespace conveyor::kernel_bench {

void add_llama_block_kernels(KernelRows& k, const GptConfig& m, int B) {
  const int T = static_cast<int>(m.seq_len), C = static_cast<int>(m.d_model),
            NH = static_cast<int>(m.heads), NKV = static_cast<int>(m.kv_head_count()),
            D = static_cast<int>(m.head_dim()), F = static_cast<int>(m.llama_ffn_dim()),
            W = C + 2 * NKV * D, N = B * T;
  const double n = N, c = C, w = W, f = F, bf = 2.0, f4 = 4.0;
  const cudaStream_t s = k.stream();
  const float eps = static_cast<float>(m.norm_eps);
  const std::size_t NC = std::size_t(N) * C, NW = std::size_t(N) * W, NF = std::size_t(N) * F;

  auto x = k.bf16(NC), x2 = k.bf16(NC), xn = k.bf16(NC), res = k.bf16(NC), out = k.bf16(NC);
  auto rstd = k.f32(N, 0.5f), norm_w = k.bf16(C, 0.1f);
  auto qkv = k.bf16(NW), atty = k.bf16(NC), lse = k.f32(std::size_t(B) * NH * T);
  auto gate_up = k.bf16(2 * NF), hact = k.bf16(NF);
  auto w_qkv = k.bf16(std::size_t(W) * C, 0.02f), w_o = k.bf16(std::size_t(C) * C, 0.02f);
  auto w_gate_up = k.bf16(std::size_t(2) * F * C, 0.02f), w_down = k.bf16(std::size_t(C) * F, 0.02f);
  auto dx = k.bf16(NC), dqkv = k.bf16(NW), dgate_up = k.bf16(2 * NF), dh = k.bf16(NF);
  auto dw = k.f32(std::size_t(2) * F * C, 0.01f), dw16 = k.bf16(std::size_t(2) * F * C, 0.01f);
  auto dnorm = k.f32(C), dnorm16 = k.bf16(C);
  // The rotary tables, as the stage model uploads them.
  const std::vector<double> inv_freq = cpu::rotary_inv_freq(D, m.rope_theta);
  std::vector<float> cos_host(std::size_t(T) * D / 2), sin_host(cos_host.size());
  cpu::rotary_tables(cos_host.data(), sin_host.data(), inv_freq.data(), T, D);
  DeviceBuffer cos(cos_host.size() * 4, current_device(), s, "rotary cos"),
      sin(sin_host.size() * 4, current_device(), s, "rotary sin");
  CUDA_CHECK(cudaMemcpyAsync(cos.data(), cos_host.data(), cos_host.size() * 4,
                             cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaMemcpyAsync(sin.data(), sin_host.data(), sin_host.size() * 4,
                             cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaStreamSynchronize(s));

  const double att = 2.0 * B * NH * double(T) * T * D;  // causal forward FLOPs, as GPT-2's row
  const double rotary_bytes = 2.0 * n * (NH + NKV) * D * bf + 2.0 * T * D / 2 * f4;

  // forward
  k.add("residual + RMSNorm forward", "block", 2, 0, 4 * n * c * bf + n * f4, [&] {
    residual_rmsnorm_forward(res.as<bf16>(), xn.as<bf16>(), rstd.as<float>(), x.as<bf16>(),
                             x2.as<bf16>(), norm_w.as<bf16>(), eps, N, C, s);
  });
  k.add("gemm qkv forward (GQA width)", "block", 1, 2 * n * c * w, 0, [&] {
    linear_forward(qkv.as<bf16>(), nullptr, xn.as<bf16>(), w_qkv.as<bf16>(), nullptr, N, C, W, s);
  });
  k.add("rotary forward (q and k, in place)", "block", 1, 0, rotary_bytes, [&] {
    rotary_forward(qkv.as<bf16>(), cos.as<float>(), sin.as<float>(), B, T, NH + NKV, D, W, s);
  });
  k.add("attention forward (causal, GQA)", "block", 1, att, 0, [&] {
    gqa_attention_forward(atty.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, C, NH, NKV, s);
  });
  k.add("gemm o forward", "block", 1, 2 * n * c * c, 0, [&] {
    linear_forward(out.as<bf16>(), nullptr, atty.as<bf16>(), w_o.as<bf16>(), nullptr, N, C, C, s);
  });
  k.add("gemm gate_up forward", "block", 1, 2 * n * c * 2 * f, 0, [&] {
    linear_forward(gate_up.as<bf16>(), nullptr, xn.as<bf16>(), w_gate_up.as<bf16>(), nullptr, N,
                   C, 2 * F, s);
  });
  k.add("SwiGLU forward", "block", 1, 0, 3 * n * f * bf, [&] {
    swiglu_forward(hact.as<bf16>(), gate_up.as<bf16>(), N, F, s);
  });
  k.add("gemm down forward", "block", 1, 2 * n * f * c, 0, [&] {
    linear_forward(out.as<bf16>(), nullptr, hact.as<bf16>(), w_down.as<bf16>(), nullptr, N, F, C,
                   s);
  });
  // backward, input gradients
  k.add("gemm down backward input", "block", 1, 2 * n * f * c, 0, [&] {
    linear_backward_input(dh.as<bf16>(), out.as<bf16>(), w_down.as<bf16>(), nullptr, N, F, C, s);
  });
  k.add("SwiGLU backward", "block", 1, 0, 5 * n * f * bf, [&] {
    swiglu_backward_input(dgate_up.as<bf16>(), dh.as<bf16>(), gate_up.as<bf16>(), N, F, s);
  });
  k.add("gemm gate_up backward input", "block", 1, 2 * n * 2 * f * c, 0, [&] {
    linear_backward_input(dx.as<bf16>(), dgate_up.as<bf16>(), w_gate_up.as<bf16>(), nullptr, N, C,
                          2 * F, s);
  });
  k.add("gemm o backward input", "block", 1, 2 * n * c * c, 0, [&] {
    linear_backward_input(dx.as<bf16>(), out.as<bf16>(), w_o.as<bf16>(), nullptr, N, C, C, s);
  });
  k.add("attention backward (causal, GQA)", "block", 1, 2.5 * att, 0, [&] {
    gqa_attention_backward_input(dqkv.as<bf16>(), out.as<bf16>(), qkv.as<bf16>(), atty.as<bf16>(),
                                 lse.as<float>(), B, T, C, NH, NKV, s);
  });
  k.add("rotary backward (dq and dk, in place)", "block", 1, 0, rotary_bytes, [&] {
    rotary_backward(dqkv.as<bf16>(), cos.as<float>(), sin.as<float>(), B, T, NH + NKV, D, W, s);
  });
  k.add("gemm qkv backward input", "block", 1, 2 * n * w * c, 0, [&] {
    linear_backward_input(dx.as<bf16>(), dqkv.as<bf16>(), w_qkv.as<bf16>(), nullptr, N, C, W, s);
  });
  k.add("RMSNorm backward input (+ residual)", "block", 2, 0, 4 * n * c * bf + n * f4, [&] {
    rmsnorm_backward_input_residual(dx.as<bf16>(), x2.as<bf16>(), out.as<bf16>(), res.as<bf16>(),
                                    norm_w.as<bf16>(), rstd.as<float>(), N, C, s);
  });
  // weight gradients, once per gradient type (optim.grad_dtype)
  auto weight_rows = [&](auto* dwg, auto* dnormg, const std::string& label,
                         const std::string& grad) {
    using G = std::remove_pointer_t<decltype(dwg)>;
    G* none = nullptr;
    k.add("gemm down backward weight (+= " + label + ")", "block", 1, 2 * n * f * c, 0, [&] {
      linear_backward_weight(dwg, none, out.as<bf16>(), hact.as<bf16>(), N, F, C, s);
    }, "", grad);
    k.add("gemm gate_up backward weight (+= " + label + ")", "block", 1, 2 * n * c * 2 * f, 0, [&] {
      linear_backward_weight(dwg, none, dgate_up.as<bf16>(), xn.as<bf16>(), N, C, 2 * F, s);
    }, "", grad);
    k.add("gemm o backward weight (+= " + label + ")", "block", 1, 2 * n * c * c, 0, [&] {
      linear_backward_weight(dwg, none, out.as<bf16>(), atty.as<bf16>(), N, C, C, s);
    }, "", grad);
    k.add("gemm qkv backward weight (+= " + label + ")", "block", 1, 2 * n * c * w, 0, [&] {
      linear_backward_weight(dwg, none, dqkv.as<bf16>(), xn.as<bf16>(), N, C, W, s);
    }, "", grad);
    k.add("RMSNorm backward weight (+= " + label + ")", "block", 2, 0, 2 * n * c * bf + n * f4, [&] {
      rmsnorm_backward_weight(dnormg, out.as<bf16>(), res.as<bf16>(), rstd.as<float>(), N, C, s);
    }, "", grad);
  };
  weight_rows(dw.as<float>(), dnorm.as<float>(), "fp32", "f32");
  weight_rows(dw16.as<bf16>(), dnorm16.as<bf16>(), "bf16", "bf16");
}

}  // namespace conveyor::kernel_bench
