// Embedding, LayerNorm (+ residual), linear (cuBLASLt, GELU epilogues) and the fused
// cross-entropy against the CPU reference layers run in double on the same bf16-exact
// inputs. Tolerances: bf16 outputs 2e-2 (scaled_error, see cuda_test_util.hpp); fp32
// outputs that only accumulate bf16-exact products in fp32 1e-3.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

constexpr double kBf16Tol = 2e-2;
constexpr double kF32Tol = 1e-3;

TEST_CASE("cuda embedding forward and weight backward match the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int B = 3, T = 37, C = 72, V = 50, maxT = 40;
  std::vector<std::int32_t> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 7 + i / 5) % 13 * 3 % V;  // repeats
  const auto wte = random_bf16(V * C, 1), wpe = random_bf16(maxT * C, 2);
  const auto dout = random_bf16(B * T * C, 3);
  const auto dwte0 = random_bf16(V * C, 4), dwpe0 = random_bf16(maxT * C, 5);

  std::vector<double> ref(B * T * C);
  const auto wte_d = to_double(wte), wpe_d = to_double(wpe);
  cpu::embedding_forward(ref.data(), tokens.data(), wte_d.data(), wpe_d.data(), B, T, C);
  auto dwte_ref = to_double(dwte0), dwpe_ref = to_double(dwpe0);
  const auto dout_d = to_double(dout);
  cpu::embedding_backward_weight(dwte_ref.data(), dwpe_ref.data(), dout_d.data(), tokens.data(), B,
                                 T, C);

  auto tok_d = upload(tokens, s);
  auto wte_g = upload_bf16(wte, s), wpe_g = upload_bf16(wpe, s), dout_g = upload_bf16(dout, s);
  auto dwte_g = upload(dwte0, s), dwpe_g = upload(dwpe0, s);
  DeviceBuffer out(B * T * C * 2, current_device(), s, "out");
  embedding_forward(out.as<bf16>(), tok_d.as<std::int32_t>(), wte_g.as<bf16>(), wpe_g.as<bf16>(),
                    B, T, C, s);
  embedding_backward_weight(dwte_g.as<float>(), dwpe_g.as<float>(), dout_g.as<bf16>(),
                            tok_d.as<std::int32_t>(), B, T, C, V, s);
  CONVEYOR_CHECK_CLOSE(ref, download_bf16(out.data(), B * T * C, s), kBf16Tol);
  CONVEYOR_CHECK_CLOSE(dwte_ref, download_f32(dwte_g.data(), V * C, s), kF32Tol);
  CONVEYOR_CHECK_CLOSE(dwpe_ref, download_f32(dwpe_g.data(), maxT * C, s), kF32Tol);
}

// C = 13 and 200 take the scalar row kernels; 768 and 2048 (multiples of 256) the
// register-resident vectorised ones.
void check_layernorm(int N, int C) {
  CAPTURE(N);
  CAPTURE(C);
  TestStream s;
  const auto a = random_bf16(N * C, 11, 1.0, 0.5), b = random_bf16(N * C, 12);
  const auto w = random_bf16(C, 13, 0.3, 1.0), bias = random_bf16(C, 14, 0.1);
  const auto dout = random_bf16(N * C, 15), dseed = random_bf16(N * C, 16);
  const auto dw0 = random_bf16(C, 17), db0 = random_bf16(C, 18);

  auto a_g = upload_bf16(a, s), b_g = upload_bf16(b, s), w_g = upload_bf16(w, s),
       bias_g = upload_bf16(bias, s), dout_g = upload_bf16(dout, s),
       dinp_g = upload_bf16(dseed, s), dw_g = upload(dw0, s), db_g = upload(db0, s);
  const int dev = current_device();
  DeviceBuffer res(N * C * 2, dev, s, "res"), out(N * C * 2, dev, s, "out"),
      mean(N * 4, dev, s, "mean"), rstd(N * 4, dev, s, "rstd");
  residual_layernorm_forward(res.as<bf16>(), out.as<bf16>(), mean.as<float>(), rstd.as<float>(),
                             a_g.as<bf16>(), b_g.as<bf16>(), w_g.as<bf16>(), bias_g.as<bf16>(), N,
                             C, s);
  // The residual form (out of place, from a separate residual gradient) before the += form
  // overwrites dseed's copy; both must give the same bits.
  auto dres_g = upload_bf16(dseed, s);
  DeviceBuffer dinp_res(N * C * 2, dev, s, "dinp residual form");
  CUDA_CHECK(cudaMemsetAsync(dinp_res.data(), 0xff, N * C * 2, s));  // poisoned
  layernorm_backward_input_residual(dinp_res.as<bf16>(), dres_g.as<bf16>(), dout_g.as<bf16>(),
                                    res.as<bf16>(), w_g.as<bf16>(), mean.as<float>(),
                                    rstd.as<float>(), N, C, s);
  layernorm_backward_input(dinp_g.as<bf16>(), dout_g.as<bf16>(), res.as<bf16>(), w_g.as<bf16>(),
                           mean.as<float>(), rstd.as<float>(), N, C, s);
  CHECK(download<std::uint16_t>(dinp_res.data(), N * C, s) ==
        download<std::uint16_t>(dinp_g.data(), N * C, s));
  layernorm_backward_weight(dw_g.as<float>(), db_g.as<float>(), dout_g.as<bf16>(), res.as<bf16>(),
                            mean.as<float>(), rstd.as<float>(), N, C, s);

  // The reference normalises the bf16-rounded residual, as the kernel does.
  const auto res_host = download_bf16(res.data(), N * C, s);
  std::vector<double> res_ref(N * C);
  for (int i = 0; i < N * C; ++i) res_ref[i] = round_to_bf16(a[i] + b[i]);
  CONVEYOR_CHECK_CLOSE(res_ref, res_host, 1e-6);
  std::vector<double> y(N * C), m(N), r(N);
  const auto wd = to_double(w), bd = to_double(bias), doutd = to_double(dout);
  cpu::layernorm_forward(y.data(), m.data(), r.data(), res_ref.data(), wd.data(), bd.data(), N, C);
  CONVEYOR_CHECK_CLOSE(y, download_bf16(out.data(), N * C, s), kBf16Tol);
  CONVEYOR_CHECK_CLOSE(m, download_f32(mean.data(), N, s), kF32Tol);
  CONVEYOR_CHECK_CLOSE(r, download_f32(rstd.data(), N, s), kF32Tol);

  auto dx = to_double(dseed);
  cpu::layernorm_backward_input(dx.data(), doutd.data(), res_ref.data(), wd.data(), m.data(),
                                r.data(), N, C);
  CONVEYOR_CHECK_CLOSE(dx, download_bf16(dinp_g.data(), N * C, s), kBf16Tol);
  auto dw = to_double(dw0), db = to_double(db0);
  cpu::layernorm_backward_weight(dw.data(), db.data(), doutd.data(), res_ref.data(), m.data(),
                                 r.data(), N, C);
  CONVEYOR_CHECK_CLOSE(dw, download_f32(dw_g.data(), C, s), kF32Tol);
  CONVEYOR_CHECK_CLOSE(db, download_f32(db_g.data(), C, s), kF32Tol);

  // Plain layernorm_forward on the residual gives the same output bit for bit.
  DeviceBuffer out2(N * C * 2, dev, s, "out2");
  layernorm_forward(out2.as<bf16>(), mean.as<float>(), rstd.as<float>(), res.as<bf16>(),
                    w_g.as<bf16>(), bias_g.as<bf16>(), N, C, s);
  CHECK(download<std::uint16_t>(out2.data(), N * C, s) ==
        download<std::uint16_t>(out.data(), N * C, s));
}

TEST_CASE("cuda residual layernorm forward and backward match the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  check_layernorm(7, 13);
  check_layernorm(45, 200);
  check_layernorm(37, 768);
  check_layernorm(9, 2048);
  check_layernorm(100, 2048);  // four chunks of backward_weight's partial sums, the last short
  check_layernorm(70, 776);    // row kernels scalar, the weight partial sums vectorised
}

// Forward with bias, with and without the fused GELU; then backward input (plain and
// through the GELU derivative) and backward weight with bias.
// N 150: three chunks of the bias gradient's partial sums, the last one short.
void check_linear(bool fuse_gelu, int N) {
  CAPTURE(N);
  TestStream s;
  set_gemm_gelu_fusion(fuse_gelu);
  const int IC = 64, OC = 96;
  const auto inp = random_bf16(N * IC, 21), w = random_bf16(OC * IC, 22, 0.2),
             bias = random_bf16(OC, 23, 0.5), dout = random_bf16(N * OC, 24),
             pre = random_bf16(N * IC, 25), dw0 = random_bf16(OC * IC, 26),
             db0 = random_bf16(OC, 27);
  const int dev = current_device();
  auto inp_g = upload_bf16(inp, s), w_g = upload_bf16(w, s), bias_g = upload_bf16(bias, s),
       dout_g = upload_bf16(dout, s), pre_g = upload_bf16(pre, s), dw_g = upload(dw0, s),
       db_g = upload(db0, s);
  DeviceBuffer out(N * OC * 2, dev, s, "out"), act(N * OC * 2, dev, s, "gelu out"),
      pre_out(N * OC * 2, dev, s, "pre gelu"), dinp(N * IC * 2, dev, s, "dinp"),
      dinp_gelu(N * IC * 2, dev, s, "dinp through gelu");
  linear_forward(out.as<bf16>(), nullptr, inp_g.as<bf16>(), w_g.as<bf16>(), bias_g.as<bf16>(), N,
                 IC, OC, s);
  linear_forward(act.as<bf16>(), pre_out.as<bf16>(), inp_g.as<bf16>(), w_g.as<bf16>(),
                 bias_g.as<bf16>(), N, IC, OC, s);
  linear_backward_input(dinp.as<bf16>(), dout_g.as<bf16>(), w_g.as<bf16>(), nullptr, N, IC, OC, s);
  linear_backward_input(dinp_gelu.as<bf16>(), dout_g.as<bf16>(), w_g.as<bf16>(), pre_g.as<bf16>(),
                        N, IC, OC, s);
  linear_backward_weight(dw_g.as<float>(), db_g.as<float>(), dout_g.as<bf16>(), inp_g.as<bf16>(),
                         N, IC, OC, s);
  s.sync();
  set_gemm_gelu_fusion(true);

  const auto inpd = to_double(inp), wd = to_double(w), biasd = to_double(bias),
             doutd = to_double(dout), pred = to_double(pre);
  std::vector<double> y(N * OC), g(N * OC);
  cpu::linear_forward(y.data(), inpd.data(), wd.data(), biasd.data(), N, IC, OC);
  cpu::gelu_forward(g.data(), y.data(), N * OC);
  CONVEYOR_CHECK_CLOSE(y, download_bf16(out.data(), N * OC, s), kBf16Tol);
  CONVEYOR_CHECK_CLOSE(y, download_bf16(pre_out.data(), N * OC, s), kBf16Tol);
  CONVEYOR_CHECK_CLOSE(g, download_bf16(act.data(), N * OC, s), kBf16Tol);

  std::vector<double> dx(N * IC), dxg(N * IC);
  cpu::linear_backward_input(dx.data(), doutd.data(), wd.data(), N, IC, OC);
  cpu::gelu_backward_input(dxg.data(), dx.data(), pred.data(), N * IC);
  CONVEYOR_CHECK_CLOSE(dx, download_bf16(dinp.data(), N * IC, s), kBf16Tol);
  CONVEYOR_CHECK_CLOSE(dxg, download_bf16(dinp_gelu.data(), N * IC, s), kBf16Tol);

  auto dw = to_double(dw0), db = to_double(db0);
  cpu::linear_backward_weight(dw.data(), db.data(), doutd.data(), inpd.data(), N, IC, OC);
  CONVEYOR_CHECK_CLOSE(dw, download_f32(dw_g.data(), OC * IC, s), kF32Tol);
  CONVEYOR_CHECK_CLOSE(db, download_f32(db_g.data(), OC, s), kF32Tol);
}

TEST_CASE("cuda linear forward and backward with fused GELU epilogues match the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  check_linear(true, 33);
  check_linear(true, 150);
}

TEST_CASE("cuda linear forward and backward with separate GELU kernels match the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  check_linear(false, 33);
}

TEST_CASE("cuda linear rejects sizes that are not multiples of 8") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  CHECK_THROWS_AS(linear_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 4, 12, 16, s),
                  std::invalid_argument);
}

// V 1000 (125 vectors: one per thread, most threads idle), 12288 (two per thread) and
// 40000 (five, the kernel's widest case) take the vectorised kernel; 128256 (Llama 3's
// vocabulary) the streaming one; V 1003 the scalar one.
void check_cross_entropy(int N, int V) {
  CAPTURE(N);
  CAPTURE(V);
  TestStream s;
  const auto logits = random_bf16(N * V, 31 + V, 2.0);
  std::vector<std::int32_t> targets(N);
  for (int n = 0; n < N; ++n) targets[n] = (n * 389 + 7) % V;
  targets[0] = V - 1;  // the row's last element (a vector's last lane)
  const float dloss = 1.0f / N;

  const auto ld = to_double(logits);
  std::vector<double> probs(std::size_t(N) * V), dl(std::size_t(N) * V);
  const double mean_ref = cpu::cross_entropy_forward(probs.data(), ld.data(), targets.data(), N, V);
  cpu::cross_entropy_backward_input(dl.data(), probs.data(), targets.data(),
                                    static_cast<double>(dloss), N, V);
  std::vector<double> row_loss(N);
  for (int n = 0; n < N; ++n) row_loss[n] = -std::log(probs[std::size_t(n) * V + targets[n]]);

  auto logits_g = upload_bf16(logits, s), tg = upload(targets, s);
  const int dev = current_device();
  DeviceBuffer losses(N * 4, dev, s, "losses"), dlogits(std::size_t(N) * V * 2, dev, s, "dlogits"),
      mean(4, dev, s, "mean"), losses_only(N * 4, dev, s, "losses only");
  cross_entropy_forward_backward(losses.as<float>(), dlogits.as<bf16>(), logits_g.as<bf16>(),
                                 tg.as<std::int32_t>(), dloss, N, V, s);
  mean_loss(mean.as<float>(), losses.as<float>(), N, s);
  CONVEYOR_CHECK_CLOSE(row_loss, download_f32(losses.data(), N, s), kF32Tol);
  CONVEYOR_CHECK_CLOSE(dl, download_bf16(dlogits.data(), std::size_t(N) * V, s), kBf16Tol);
  CHECK(download_f32(mean.data(), 1, s)[0] == doctest::Approx(mean_ref).epsilon(1e-4));

  // Without dlogits: the same losses, bit for bit.
  cross_entropy_forward_backward(losses_only.as<float>(), nullptr, logits_g.as<bf16>(),
                                 tg.as<std::int32_t>(), dloss, N, V, s);
  CHECK(download<std::uint32_t>(losses_only.data(), N, s) ==
        download<std::uint32_t>(losses.data(), N, s));
  // In place over the logits, as the stage uses it: same bits as the out-of-place run.
  cross_entropy_forward_backward(losses.as<float>(), logits_g.as<bf16>(), logits_g.as<bf16>(),
                                 tg.as<std::int32_t>(), dloss, N, V, s);
  CHECK(download<std::uint16_t>(logits_g.data(), std::size_t(N) * V, s) ==
        download<std::uint16_t>(dlogits.data(), std::size_t(N) * V, s));
}

TEST_CASE("cuda fused cross-entropy loss and dlogits match the CPU reference in place and out of place") {
  CONVEYOR_REQUIRE_GPU();
  check_cross_entropy(13, 1000);
  check_cross_entropy(5, 1003);
  check_cross_entropy(6, 12288);
  check_cross_entropy(3, 40000);
  check_cross_entropy(3, 128256);
  // More rows than multiprocessors: the streaming kernel's blocks each take several rows.
  check_cross_entropy(333, 128256);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
