// The Llama family's element-wise and row-wise CUDA kernels (RMSNorm + residual, rotary on
// a fused qkv row, SwiGLU) against the CPU reference run in double on the same bf16-exact
// inputs. Tolerances: bf16 outputs 2e-2 (scaled_error, cuda_test_util.hpp: about two bf16
// roundings of headroom); fp32 outputs that accumulate bf16-exact products in fp32 1e-3.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rotary.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rotary.hpp"
#include "kernels/cuda/swiglu.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

constexpr double kBf16Tol = 2e-2;
constexpr double kF32Tol = 1e-3;

// C = 13 and 200: widths that are no multiple of a warp (the scalar kernels); 768 and
// 2048 (Llama-3.2-1B's): multiples of 256, the register-resident 16-byte kernels.
void check_rmsnorm(int N, int C) {
  CAPTURE(N);
  CAPTURE(C);
  TestStream s;
  const float eps = 1e-5f;
  const auto a = random_bf16(N * C, 21, 1.0, 0.3), b = random_bf16(N * C, 22);
  const auto w = random_bf16(C, 23, 0.3, 1.0);
  const auto dout = random_bf16(N * C, 24), dseed = random_bf16(N * C, 25);
  const auto dw0 = random_bf16(C, 26);

  const int dev = current_device();
  auto a_g = upload_bf16(a, s), b_g = upload_bf16(b, s), w_g = upload_bf16(w, s),
       dout_g = upload_bf16(dout, s), dinp_g = upload_bf16(dseed, s), dres_g = upload_bf16(dseed, s),
       dw_g = upload(dw0, s), dw_bf16_g = upload_bf16(dw0, s);
  DeviceBuffer res(N * C * 2, dev, s, "res"), out(N * C * 2, dev, s, "out"),
      rstd(N * 4, dev, s, "rstd");
  residual_rmsnorm_forward(res.as<bf16>(), out.as<bf16>(), rstd.as<float>(), a_g.as<bf16>(),
                           b_g.as<bf16>(), w_g.as<bf16>(), eps, N, C, s);
  DeviceBuffer dinp_res(N * C * 2, dev, s, "dinp residual form");
  CUDA_CHECK(cudaMemsetAsync(dinp_res.data(), 0xff, N * C * 2, s));  // poisoned
  rmsnorm_backward_input_residual(dinp_res.as<bf16>(), dres_g.as<bf16>(), dout_g.as<bf16>(),
                                  res.as<bf16>(), w_g.as<bf16>(), rstd.as<float>(), N, C, s);
  rmsnorm_backward_input(dinp_g.as<bf16>(), dout_g.as<bf16>(), res.as<bf16>(), w_g.as<bf16>(),
                         rstd.as<float>(), N, C, s);
  CHECK(download<std::uint16_t>(dinp_res.data(), N * C, s) ==
        download<std::uint16_t>(dinp_g.data(), N * C, s));
  rmsnorm_backward_weight(dw_g.as<float>(), dout_g.as<bf16>(), res.as<bf16>(), rstd.as<float>(), N,
                          C, s);
  rmsnorm_backward_weight(dw_bf16_g.as<bf16>(), dout_g.as<bf16>(), res.as<bf16>(),
                          rstd.as<float>(), N, C, s);

  // The reference normalises the bf16-rounded residual, as the kernel does.
  std::vector<double> res_ref(N * C);
  for (int i = 0; i < N * C; ++i) res_ref[i] = round_to_bf16(a[i] + b[i]);
  CONVEYOR_CHECK_CLOSE(res_ref, download_bf16(res.data(), N * C, s), 1e-6);
  std::vector<double> y(N * C), r(N);
  const auto wd = to_double(w), doutd = to_double(dout);
  cpu::rmsnorm_forward(y.data(), r.data(), res_ref.data(), wd.data(), eps, N, C);
  CONVEYOR_CHECK_CLOSE(y, download_bf16(out.data(), N * C, s), kBf16Tol);
  CONVEYOR_CHECK_CLOSE(r, download_f32(rstd.data(), N, s), kF32Tol);
  auto dx = to_double(dseed);
  cpu::rmsnorm_backward_input(dx.data(), doutd.data(), res_ref.data(), wd.data(), r.data(), N, C);
  CONVEYOR_CHECK_CLOSE(dx, download_bf16(dinp_g.data(), N * C, s), kBf16Tol);
  auto dw = to_double(dw0);
  cpu::rmsnorm_backward_weight(dw.data(), doutd.data(), res_ref.data(), r.data(), N, C);
  CONVEYOR_CHECK_CLOSE(dw, download_f32(dw_g.data(), C, s), kF32Tol);
  CONVEYOR_CHECK_CLOSE(dw, download_bf16(dw_bf16_g.data(), C, s), kBf16Tol);

  // Plain rmsnorm_forward on the residual gives the same output bit for bit.
  DeviceBuffer out2(N * C * 2, dev, s, "out2"), rstd2(N * 4, dev, s, "rstd2");
  rmsnorm_forward(out2.as<bf16>(), rstd2.as<float>(), res.as<bf16>(), w_g.as<bf16>(), eps, N, C, s);
  CHECK(download<std::uint16_t>(out2.data(), N * C, s) ==
        download<std::uint16_t>(out.data(), N * C, s));
}

TEST_CASE("cuda rmsnorm (+ residual) forward, input and weight backward match the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  check_rmsnorm(67, 13);
  check_rmsnorm(129, 200);
  check_rmsnorm(96, 768);
  check_rmsnorm(256, 2048);
}

TEST_CASE("cuda rmsnorm weight gradient is bitwise repeatable") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int N = 1000, C = 384;
  const auto x = random_bf16(N * C, 31), dout = random_bf16(N * C, 32), w = random_bf16(C, 33, 0.2, 1.0);
  auto x_g = upload_bf16(x, s), dout_g = upload_bf16(dout, s), w_g = upload_bf16(w, s);
  const int dev = current_device();
  DeviceBuffer out(N * C * 2, dev, s, "out"), rstd(N * 4, dev, s, "rstd");
  rmsnorm_forward(out.as<bf16>(), rstd.as<float>(), x_g.as<bf16>(), w_g.as<bf16>(), 1e-6f, N, C, s);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    auto dw = upload(std::vector<float>(C, 0.5f), s);
    rmsnorm_backward_weight(dw.as<float>(), dout_g.as<bf16>(), x_g.as<bf16>(), rstd.as<float>(), N,
                            C, s);
    runs.push_back(download_f32(dw.data(), C, s));
  }
  CHECK(same_bytes(runs[0].data(), runs[1].data(), C * sizeof(float)));
}

// q (H heads) and k (KV heads) of a fused [q | k | v] row rotated in one call; v untouched.
// D 16 and 64 (with a stride): the 16-byte kernel; D 12: the per-pair one.
void check_rotary(int B, int T, int H, int KV, int D, std::int64_t pad) {
  CAPTURE(D);
  TestStream s;
  const std::int64_t row = std::int64_t{H + 2 * KV} * D + pad;  // [q | k | v | pad]
  const std::int64_t n = B * T * row;
  const auto qkv = random_bf16(n, 41 + D);
  auto inv_freq = cpu::rotary_inv_freq(D, 500000.0);
  cpu::rotary_llama3_scaling(inv_freq, cpu::RotaryLlama3Scaling{8.0, 1.0, 4.0, 16.0});
  std::vector<float> cos(T * D / 2), sin(T * D / 2);
  cpu::rotary_tables(cos.data(), sin.data(), inv_freq.data(), T, D);
  std::vector<double> cos_d(T * D / 2), sin_d(T * D / 2);
  cpu::rotary_tables(cos_d.data(), sin_d.data(), inv_freq.data(), T, D);

  auto x_g = upload_bf16(qkv, s), cos_g = upload(cos, s), sin_g = upload(sin, s);
  rotary_forward(x_g.as<bf16>(), cos_g.as<float>(), sin_g.as<float>(), B, T, H + KV, D, row, s);
  const auto got = download_bf16(x_g.data(), n, s);
  auto ref = to_double(qkv);
  cpu::rotary_forward(ref.data(), cos_d.data(), sin_d.data(), B, T, H + KV, D, row);
  CONVEYOR_CHECK_CLOSE(ref, got, kBf16Tol);
  // The v part (and the padding) is not touched: bitwise the input.
  bool v_same = true;
  for (std::int64_t bt = 0; bt < B * T; ++bt)
    for (std::int64_t c = (H + KV) * D; c < row; ++c) v_same = v_same && got[bt * row + c] == qkv[bt * row + c];
  CHECK(v_same);

  // Backward is the CPU reference's backward on the same gradient ...
  const auto dout = random_bf16(n, 42 + D);
  auto d_g = upload_bf16(dout, s);
  rotary_backward(d_g.as<bf16>(), cos_g.as<float>(), sin_g.as<float>(), B, T, H + KV, D, row, s);
  auto dref = to_double(dout);
  cpu::rotary_backward(dref.data(), cos_d.data(), sin_d.data(), B, T, H + KV, D, row);
  CONVEYOR_CHECK_CLOSE(dref, download_bf16(d_g.data(), n, s), kBf16Tol);
  // ... and undoes the forward (up to the bf16 roundings of the two passes).
  rotary_backward(x_g.as<bf16>(), cos_g.as<float>(), sin_g.as<float>(), B, T, H + KV, D, row, s);
  CONVEYOR_CHECK_CLOSE(to_double(qkv), download_bf16(x_g.data(), n, s), kBf16Tol);
}

TEST_CASE("cuda rotary rotates q and k of a fused qkv row in one pass, as the CPU reference, and backward inverts it") {
  CONVEYOR_REQUIRE_GPU();
  check_rotary(2, 33, 4, 2, 16, 0);
  check_rotary(2, 17, 6, 2, 64, 8);
  check_rotary(2, 33, 4, 2, 12, 0);
}

TEST_CASE("cuda rotary refuses an odd head size and a row shorter than its heads") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  DeviceBuffer x(1024, current_device(), s, "x"), t(1024, current_device(), s, "t");
  CHECK_THROWS_WITH(rotary_forward(x.as<bf16>(), t.as<float>(), t.as<float>(), 1, 2, 2, 7, 14, s),
                    doctest::Contains("must be even"));
  CHECK_THROWS_WITH(rotary_forward(x.as<bf16>(), t.as<float>(), t.as<float>(), 1, 2, 2, 8, 15, s),
                    doctest::Contains("row_stride 15"));
}

TEST_CASE("cuda swiglu forward and input backward match the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  for (const auto& [N, F] : {std::pair{37, 11}, std::pair{64, 256}, std::pair{16, 8192}}) {
    CAPTURE(N);
    CAPTURE(F);
    // Gates out to |g| ~ 6, where silu bends and saturates.
    const auto gate_up = random_bf16(N * 2 * F, 51, 2.5), dout = random_bf16(N * F, 52);
    auto gu_g = upload_bf16(gate_up, s), dout_g = upload_bf16(dout, s);
    const int dev = current_device();
    DeviceBuffer out(N * F * 2, dev, s, "out"), dgu(N * 2 * F * 2, dev, s, "dgate_up");
    CUDA_CHECK(cudaMemsetAsync(dgu.data(), 0xff, N * 2 * F * 2, s));  // poisoned: every element written
    swiglu_forward(out.as<bf16>(), gu_g.as<bf16>(), N, F, s);
    swiglu_backward_input(dgu.as<bf16>(), dout_g.as<bf16>(), gu_g.as<bf16>(), N, F, s);
    const auto gud = to_double(gate_up), doutd = to_double(dout);
    std::vector<double> y(N * F), dg(N * 2 * F);
    cpu::swiglu_forward(y.data(), gud.data(), N, F);
    cpu::swiglu_backward_input(dg.data(), doutd.data(), gud.data(), N, F);
    CONVEYOR_CHECK_CLOSE(y, download_bf16(out.data(), N * F, s), kBf16Tol);
    CONVEYOR_CHECK_CLOSE(dg, download_bf16(dgu.data(), N * 2 * F, s), kBf16Tol);
  }
}

}  // namespace
}  // namespace conveyor
#endif
