// Every reduction kernel, the cuBLASLt GEMMs and the attention of both backends (cuDNN's,
// the default, and conveyor's kernels), run twice on the same inputs into fresh buffers,
// give bitwise identical results. Sizes are large enough that cuBLASLt may pick split-K for
// the weight gradient (k = N = 4096) and that the reductions span many blocks.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/grad_norm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

struct Outputs {
  std::vector<std::uint16_t> ln_out, ln_dinp, lin_out, lin_dinp, dlogits;
  std::vector<std::uint16_t> att_out[2], att_dqkv[2];  // per backend: cudnn, kernels
  std::vector<float> ln_dw, lin_dw, lin_db, losses, norm, dwte;
};

TEST_CASE("cuda kernels give bitwise identical results when run twice") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int dev = current_device();
  const int B = 4, T = 1024, C = 256, NH = 4, N = B * T, H = 4 * C, V = 512;
  const auto x = random_bf16(std::size_t(N) * C, 91), w = random_bf16(C, 92, 0.2, 1.0),
             bias = random_bf16(C, 93), dout = random_bf16(std::size_t(N) * C, 94),
             fw = random_bf16(std::size_t(H) * C, 95, 0.05), fb = random_bf16(H, 96),
             dh = random_bf16(std::size_t(N) * H, 97), qkv = random_bf16(std::size_t(N) * 3 * C, 98),
             logits = random_bf16(std::size_t(N) * V, 99, 3.0);
  std::vector<std::int32_t> tokens(N);
  for (int i = 0; i < N; ++i) tokens[i] = (i * 131) % V;
  auto x_g = upload_bf16(x, s), w_g = upload_bf16(w, s), b_g = upload_bf16(bias, s),
       dout_g = upload_bf16(dout, s), fw_g = upload_bf16(fw, s), fb_g = upload_bf16(fb, s),
       dh_g = upload_bf16(dh, s), qkv_g = upload_bf16(qkv, s), logits_g = upload_bf16(logits, s),
       tok_g = upload(tokens, s);

  auto run = [&] {
    Outputs o;
    auto bf = [&](std::size_t n) { return DeviceBuffer(n * 2, dev, s, "det bf16"); };
    auto f32 = [&](std::size_t n) {
      DeviceBuffer b(n * 4, dev, s, "det f32");
      CUDA_CHECK(cudaMemsetAsync(b.data(), 0, n * 4, s));
      return b;
    };
    DeviceBuffer ln_out = bf(std::size_t(N) * C), mean = f32(N), rstd = f32(N),
                 ln_dinp = bf(std::size_t(N) * C), ln_dw = f32(C), ln_db = f32(C);
    CUDA_CHECK(cudaMemsetAsync(ln_dinp.data(), 0, std::size_t(N) * C * 2, s));
    layernorm_forward(ln_out.as<bf16>(), mean.as<float>(), rstd.as<float>(), x_g.as<bf16>(),
                      w_g.as<bf16>(), b_g.as<bf16>(), N, C, s);
    layernorm_backward_input(ln_dinp.as<bf16>(), dout_g.as<bf16>(), x_g.as<bf16>(), w_g.as<bf16>(),
                             mean.as<float>(), rstd.as<float>(), N, C, s);
    layernorm_backward_weight(ln_dw.as<float>(), ln_db.as<float>(), dout_g.as<bf16>(),
                              x_g.as<bf16>(), mean.as<float>(), rstd.as<float>(), N, C, s);

    DeviceBuffer lin_out = bf(std::size_t(N) * H), pre = bf(std::size_t(N) * H),
                 lin_dinp = bf(std::size_t(N) * C), lin_dw = f32(std::size_t(H) * C),
                 lin_db = f32(H);
    linear_forward(lin_out.as<bf16>(), pre.as<bf16>(), ln_out.as<bf16>(), fw_g.as<bf16>(),
                   fb_g.as<bf16>(), N, C, H, s);
    linear_backward_input(lin_dinp.as<bf16>(), dh_g.as<bf16>(), fw_g.as<bf16>(), nullptr, N, C, H,
                          s);
    linear_backward_weight(lin_dw.as<float>(), lin_db.as<float>(), dh_g.as<bf16>(),
                           ln_out.as<bf16>(), N, C, H, s);

    for (const AttentionBackend backend : {AttentionBackend::cudnn, AttentionBackend::kernels}) {
      const int k = backend == AttentionBackend::cudnn ? 0 : 1;
      DeviceBuffer att_out = bf(std::size_t(N) * C), lse = f32(std::size_t(B) * NH * T),
                   dqkv = bf(std::size_t(N) * 3 * C);
      set_attention_backend(backend);
      attention_forward(att_out.as<bf16>(), lse.as<float>(), qkv_g.as<bf16>(), B, T, C, NH, s);
      attention_backward_input(dqkv.as<bf16>(), dout_g.as<bf16>(), qkv_g.as<bf16>(),
                               att_out.as<bf16>(), lse.as<float>(), B, T, C, NH, s);
      set_attention_backend(AttentionBackend::cudnn);  // the default again
      o.att_out[k] = download<std::uint16_t>(att_out.data(), std::size_t(N) * C, s);
      o.att_dqkv[k] = download<std::uint16_t>(dqkv.data(), std::size_t(N) * 3 * C, s);
    }

    DeviceBuffer losses = f32(N), dlogits = bf(std::size_t(N) * V), norm = f32(1),
                 dwte = f32(std::size_t(V) * C), dwpe = f32(std::size_t(T) * C);
    cross_entropy_forward_backward(losses.as<float>(), dlogits.as<bf16>(), logits_g.as<bf16>(),
                                   tok_g.as<std::int32_t>(), 1.0f / N, N, V, s);
    grad_square_sum(norm.as<float>(), lin_dw.as<float>(), std::int64_t(H) * C, false, s);
    embedding_backward_weight(dwte.as<float>(), dwpe.as<float>(), dout_g.as<bf16>(),
                              tok_g.as<std::int32_t>(), B, T, C, V, s);

    o.ln_out = download<std::uint16_t>(ln_out.data(), std::size_t(N) * C, s);
    o.ln_dinp = download<std::uint16_t>(ln_dinp.data(), std::size_t(N) * C, s);
    o.ln_dw = download_f32(ln_dw.data(), C, s);
    o.lin_out = download<std::uint16_t>(lin_out.data(), std::size_t(N) * H, s);
    o.lin_dinp = download<std::uint16_t>(lin_dinp.data(), std::size_t(N) * C, s);
    o.lin_dw = download_f32(lin_dw.data(), std::size_t(H) * C, s);
    o.lin_db = download_f32(lin_db.data(), H, s);
    o.losses = download_f32(losses.data(), N, s);
    o.dlogits = download<std::uint16_t>(dlogits.data(), std::size_t(N) * V, s);
    o.norm = download_f32(norm.data(), 1, s);
    o.dwte = download_f32(dwte.data(), std::size_t(V) * C, s);
    return o;
  };
  const Outputs a = run();
  const Outputs b = run();
  auto same = [](const auto& u, const auto& v) {
    return u.size() == v.size() && same_bytes(u.data(), v.data(), u.size() * sizeof(u[0]));
  };
  CHECK(same(a.ln_out, b.ln_out));
  CHECK(same(a.ln_dinp, b.ln_dinp));
  CHECK(same(a.ln_dw, b.ln_dw));
  CHECK(same(a.lin_out, b.lin_out));
  CHECK(same(a.lin_dinp, b.lin_dinp));
  CHECK(same(a.lin_dw, b.lin_dw));
  CHECK(same(a.lin_db, b.lin_db));
  for (int k = 0; k < 2; ++k) {
    CAPTURE(k);  // 0 cudnn, 1 kernels
    CHECK(same(a.att_out[k], b.att_out[k]));
    CHECK(same(a.att_dqkv[k], b.att_dqkv[k]));
  }
  CHECK(same(a.losses, b.losses));
  CHECK(same(a.dlogits, b.dlogits));
  CHECK(same(a.norm, b.norm));
  CHECK(same(a.dwte, b.dwte));
  CHECK(a.norm[0] > 0.0f);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
