// GPT-2's block kernels at one model's shapes (kernel_rows.hpp).
#include <cstdint>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/bench/kernel_rows.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"

namespace conveyor::kernel_bench {

void add_gpt2_block_kernels(KernelRows& k, const GptConfig& m, int B) {
  const int T = static_cast<int>(m.seq_len), C = static_cast<int>(m.d_model),
            NH = static_cast<int>(m.heads), H = static_cast<int>(m.mlp_hidden()), N = B * T;
  const double n = N, c = C, h = H, bf = 2.0, f4 = 4.0;
  const cudaStream_t stream = k.stream();
  const std::size_t NC = std::size_t(N) * C, NH4 = std::size_t(N) * H;
  {  // one block's kernels
    auto x = k.bf16(NC), x2 = k.bf16(NC), ln = k.bf16(NC), res = k.bf16(NC);
    auto mean = k.f32(N), rstd = k.f32(N, 0.5f);
    auto ln_w = k.bf16(C), ln_b = k.bf16(C, 0.1f);
    auto qkv = k.bf16(3 * NC), atty = k.bf16(NC), lse = k.f32(std::size_t(B) * NH * T);
    auto pre = k.bf16(NH4), act = k.bf16(NH4), out = k.bf16(NC);
    auto w_qkv = k.bf16(std::size_t(3) * C * C, 0.02f), b_qkv = k.bf16(3 * C, 0.02f);
    auto w_fc1 = k.bf16(std::size_t(H) * C, 0.02f), b_fc1 = k.bf16(H, 0.02f);
    auto w_fc2 = k.bf16(std::size_t(C) * H, 0.02f), b_fc2 = k.bf16(C, 0.02f);
    auto dw = k.f32(std::size_t(H) * C, 0.01f), db = k.f32(H, 0.01f);
    auto dw16 = k.bf16(std::size_t(H) * C, 0.01f), db16 = k.bf16(H, 0.01f);
    auto dx = k.bf16(NC), dqkv = k.bf16(3 * NC), dh = k.bf16(NH4);
    auto dlnw = k.f32(C), dlnb = k.f32(C), dlnw16 = k.bf16(C), dlnb16 = k.bf16(C);

    k.add("residual + LayerNorm forward", "block", 2, 0, (4 * n * c) * bf + 2 * n * f4, [&] {
      residual_layernorm_forward(res.as<bf16>(), ln.as<bf16>(), mean.as<float>(), rstd.as<float>(),
                                 x.as<bf16>(), x2.as<bf16>(), ln_w.as<bf16>(), ln_b.as<bf16>(), N,
                                 C, stream);
    });
    k.add("gemm qkv forward (+bias)", "block", 1, 2 * n * c * 3 * c, 0, [&] {
      linear_forward(qkv.as<bf16>(), nullptr, ln.as<bf16>(), w_qkv.as<bf16>(), b_qkv.as<bf16>(), N,
                     C, 3 * C, stream);
    });
    // A causal softmax needs sane logits: scale q and k down (random values of stddev 1
    // over 128 dims would give scores of stddev ~1, which is fine).
    const double att = 2.0 * B * NH * double(T) * T * (double(C) / NH);  // causal fwd FLOPs
    k.add("attention forward (causal)", "block", 1, att, 0, [&] {
      attention_forward(atty.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, C, NH, stream);
    });
    k.add("gemm proj forward (+bias)", "block", 1, 2 * n * c * c, 0, [&] {
      linear_forward(out.as<bf16>(), nullptr, atty.as<bf16>(), w_qkv.as<bf16>(), b_qkv.as<bf16>(),
                     N, C, C, stream);
    });
    k.add("gemm fc1 forward (+bias +GELU)", "block", 1, 2 * n * c * h, 0, [&] {
      linear_forward(act.as<bf16>(), pre.as<bf16>(), ln.as<bf16>(), w_fc1.as<bf16>(),
                     b_fc1.as<bf16>(), N, C, H, stream);
    });
    k.add("gemm fc2 forward (+bias)", "block", 1, 2 * n * h * c, 0, [&] {
      linear_forward(out.as<bf16>(), nullptr, act.as<bf16>(), w_fc2.as<bf16>(), b_fc2.as<bf16>(),
                     N, H, C, stream);
    });
    k.add("gemm fc2 backward input (+dGELU)", "block", 1, 2 * n * h * c, 0, [&] {
      linear_backward_input(dh.as<bf16>(), out.as<bf16>(), w_fc2.as<bf16>(), pre.as<bf16>(), N, H,
                            C, stream);
    });
    k.add("gemm fc1 backward input", "block", 1, 2 * n * c * h, 0, [&] {
      linear_backward_input(dx.as<bf16>(), dh.as<bf16>(), w_fc1.as<bf16>(), nullptr, N, C, H,
                            stream);
    });
    k.add("gemm proj backward input", "block", 1, 2 * n * c * c, 0, [&] {
      linear_backward_input(dx.as<bf16>(), out.as<bf16>(), w_qkv.as<bf16>(), nullptr, N, C, C,
                            stream);
    });
    k.add("attention backward (causal)", "block", 1, 2.5 * att, 0, [&] {
      attention_backward_input(dqkv.as<bf16>(), out.as<bf16>(), qkv.as<bf16>(), atty.as<bf16>(),
                               lse.as<float>(), B, T, C, NH, stream);
    });
    k.add("gemm qkv backward input", "block", 1, 2 * n * 3 * c * c, 0, [&] {
      linear_backward_input(dx.as<bf16>(), dqkv.as<bf16>(), w_qkv.as<bf16>(), nullptr, N, C, 3 * C,
                            stream);
    });
    k.add("LayerNorm backward input (+=)", "block", 2, 0, 4 * n * c * bf + 2 * n * f4, [&] {
      layernorm_backward_input(dx.as<bf16>(), out.as<bf16>(), res.as<bf16>(), ln_w.as<bf16>(),
                               mean.as<float>(), rstd.as<float>(), N, C, stream);
    });
    // The weight-gradient kernels once per gradient type (the pointers' type picks the
    // launchers' overload); `label` names it in the row, `grad` is its optim.grad_dtype.
    auto weight_rows = [&](auto* dwg, auto* dbg, auto* dlnwg, auto* dlnbg,
                           const std::string& label, const std::string& grad) {
      k.add("gemm fc2 backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * h * c, 0, [&] {
        linear_backward_weight(dwg, dbg, out.as<bf16>(), act.as<bf16>(), N, H, C, stream);
      }, "", grad);
      k.add("gemm fc1 backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * c * h, 0, [&] {
        linear_backward_weight(dwg, dbg, dh.as<bf16>(), ln.as<bf16>(), N, C, H, stream);
      }, "", grad);
      k.add("gemm proj backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * c * c, 0, [&] {
        linear_backward_weight(dwg, dbg, out.as<bf16>(), atty.as<bf16>(), N, C, C, stream);
      }, "", grad);
      k.add("gemm qkv backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * c * 3 * c, 0,
          [&] {
            linear_backward_weight(dwg, dbg, dqkv.as<bf16>(), ln.as<bf16>(), N, C, 3 * C, stream);
          },
          "", grad);
      const double ln_bytes = 2 * n * c * bf + 2 * n * f4;
      k.add("LayerNorm backward weight (+= " + label + ")", "block", 2, 0, ln_bytes,
          [&] {
            layernorm_backward_weight(dlnwg, dlnbg, out.as<bf16>(), res.as<bf16>(),
                                      mean.as<float>(), rstd.as<float>(), N, C, stream);
          },
          "", grad);
    };
    weight_rows(dw.as<float>(), db.as<float>(), dlnw.as<float>(), dlnb.as<float>(), "fp32", "f32");
    weight_rows(dw16.as<bf16>(), db16.as<bf16>(), dlnw16.as<bf16>(), dlnb16.as<bf16>(), "bf16",
                "bf16");
  }
}

}  // namespace conveyor::kernel_bench
