// The bf16-gradient forms of the weight-gradient launchers (optim.grad_dtype bf16: linear
// GEMM + bias, LayerNorm, embedding) accumulating into bf16, against the CPU reference
// layers run in double. (The readers, sum of squares and AdamW, are in cuda_optim_test.)
//
// Tolerances (scaled_error, cuda_test_util.hpp): a launch sums in fp32 and rounds each
// gradient element to bf16 once, so one launch onto a random nonzero seed is within 2^-8
// relative (plus the fp32 sum's ~1e-4): 1e-2. A second launch adds its own rounding and
// carries the first one's, which is relative to the intermediate value and so up to a few
// times 2^-8 of the final scale: 2e-2 (the bf16-output tolerance of cuda_layers_test).
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

constexpr double kOneLaunchTol = 1e-2;
constexpr double kTwoLaunchTol = 2e-2;

TEST_CASE("cuda linear backward weight accumulates bf16 gradients like the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  // 33 rows: a partial bias chunk. 1024 rows over a small output: cuBLASLt may split K
  // (the bf16 form keeps split-K partials in fp32, gemm.cu).
  struct Dims {
    int N, IC, OC;
  };
  for (const Dims d : {Dims{33, 64, 96}, Dims{1024, 128, 384}}) {
    const int N = d.N, IC = d.IC, OC = d.OC;
    CAPTURE(N);
    const auto inp = random_bf16(std::size_t(N) * IC, 101),
               dout1 = random_bf16(std::size_t(N) * OC, 102),
               dout2 = random_bf16(std::size_t(N) * OC, 103),
               dw0 = random_bf16(std::size_t(OC) * IC, 104), db0 = random_bf16(OC, 105);
    auto inp_g = upload_bf16(inp, s), d1_g = upload_bf16(dout1, s), d2_g = upload_bf16(dout2, s),
         dw_g = upload_bf16(dw0, s), db_g = upload_bf16(db0, s);
    const auto inpd = to_double(inp), d1 = to_double(dout1), d2 = to_double(dout2);
    auto dw = to_double(dw0), db = to_double(db0);

    linear_backward_weight(dw_g.as<bf16>(), db_g.as<bf16>(), d1_g.as<bf16>(), inp_g.as<bf16>(), N,
                           IC, OC, s);
    cpu::linear_backward_weight(dw.data(), db.data(), d1.data(), inpd.data(), N, IC, OC);
    CONVEYOR_CHECK_CLOSE(dw, download_bf16(dw_g.data(), std::size_t(OC) * IC, s), kOneLaunchTol);
    CONVEYOR_CHECK_CLOSE(db, download_bf16(db_g.data(), OC, s), kOneLaunchTol);

    linear_backward_weight(dw_g.as<bf16>(), db_g.as<bf16>(), d2_g.as<bf16>(), inp_g.as<bf16>(), N,
                           IC, OC, s);
    cpu::linear_backward_weight(dw.data(), db.data(), d2.data(), inpd.data(), N, IC, OC);
    CONVEYOR_CHECK_CLOSE(dw, download_bf16(dw_g.data(), std::size_t(OC) * IC, s), kTwoLaunchTol);
    CONVEYOR_CHECK_CLOSE(db, download_bf16(db_g.data(), OC, s), kTwoLaunchTol);

    // Without a bias (the LM head): the weight gradient alone.
    auto dw_nobias = upload_bf16(dw0, s);
    linear_backward_weight(dw_nobias.as<bf16>(), nullptr, d1_g.as<bf16>(), inp_g.as<bf16>(), N, IC,
                           OC, s);
    auto dw_ref = to_double(dw0);
    cpu::linear_backward_weight<double>(dw_ref.data(), nullptr, d1.data(), inpd.data(), N, IC, OC);
    CONVEYOR_CHECK_CLOSE(dw_ref, download_bf16(dw_nobias.data(), std::size_t(OC) * IC, s),
                         kOneLaunchTol);
  }
}

TEST_CASE("cuda LayerNorm backward weight accumulates bf16 gradients like the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  struct Dims {
    int N, C;
  };
  for (const Dims d : {Dims{45, 200}, Dims{37, 768}}) {
    const int N = d.N, C = d.C;
    CAPTURE(N);
    CAPTURE(C);
    const auto x = random_bf16(std::size_t(N) * C, 111, 1.0, 0.5);
    const auto w = random_bf16(C, 112, 0.3, 1.0), bias = random_bf16(C, 113, 0.1);
    const auto dout1 = random_bf16(std::size_t(N) * C, 114),
               dout2 = random_bf16(std::size_t(N) * C, 115);
    const auto dw0 = random_bf16(C, 116), db0 = random_bf16(C, 117);
    const int dev = current_device();
    auto x_g = upload_bf16(x, s), w_g = upload_bf16(w, s), bias_g = upload_bf16(bias, s),
         d1_g = upload_bf16(dout1, s), d2_g = upload_bf16(dout2, s), dw_g = upload_bf16(dw0, s),
         db_g = upload_bf16(db0, s);
    DeviceBuffer out(std::size_t(N) * C * 2, dev, s, "out"), mean(N * 4, dev, s, "mean"),
        rstd(N * 4, dev, s, "rstd");
    layernorm_forward(out.as<bf16>(), mean.as<float>(), rstd.as<float>(), x_g.as<bf16>(),
                      w_g.as<bf16>(), bias_g.as<bf16>(), N, C, s);
    // The reference computes its own statistics in double; the kernel's fp32 ones agree
    // to ~1e-7 relative (cuda_layers_test).
    const auto xd = to_double(x), wd = to_double(w), bd = to_double(bias), d1 = to_double(dout1),
               d2 = to_double(dout2);
    std::vector<double> y(std::size_t(N) * C), m(N), r(N);
    cpu::layernorm_forward(y.data(), m.data(), r.data(), xd.data(), wd.data(), bd.data(), N, C);
    auto dw = to_double(dw0), db = to_double(db0);

    layernorm_backward_weight(dw_g.as<bf16>(), db_g.as<bf16>(), d1_g.as<bf16>(), x_g.as<bf16>(),
                              mean.as<float>(), rstd.as<float>(), N, C, s);
    cpu::layernorm_backward_weight(dw.data(), db.data(), d1.data(), xd.data(), m.data(), r.data(),
                                   N, C);
    CONVEYOR_CHECK_CLOSE(dw, download_bf16(dw_g.data(), C, s), kOneLaunchTol);
    CONVEYOR_CHECK_CLOSE(db, download_bf16(db_g.data(), C, s), kOneLaunchTol);

    layernorm_backward_weight(dw_g.as<bf16>(), db_g.as<bf16>(), d2_g.as<bf16>(), x_g.as<bf16>(),
                              mean.as<float>(), rstd.as<float>(), N, C, s);
    cpu::layernorm_backward_weight(dw.data(), db.data(), d2.data(), xd.data(), m.data(), r.data(),
                                   N, C);
    CONVEYOR_CHECK_CLOSE(dw, download_bf16(dw_g.data(), C, s), kTwoLaunchTol);
    CONVEYOR_CHECK_CLOSE(db, download_bf16(db_g.data(), C, s), kTwoLaunchTol);
  }
}

TEST_CASE("cuda embedding backward weight accumulates bf16 gradients like the CPU reference") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int B = 3, T = 37, C = 72, V = 50, maxT = 40;
  std::vector<std::int32_t> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 7 + i / 5) % 13 * 3 % V;  // repeats
  const auto dout1 = random_bf16(std::size_t(B) * T * C, 121),
             dout2 = random_bf16(std::size_t(B) * T * C, 122);
  const auto dwte0 = random_bf16(std::size_t(V) * C, 123),
             dwpe0 = random_bf16(std::size_t(maxT) * C, 124);
  auto tok_g = upload(tokens, s), d1_g = upload_bf16(dout1, s), d2_g = upload_bf16(dout2, s),
       dwte_g = upload_bf16(dwte0, s), dwpe_g = upload_bf16(dwpe0, s);
  auto dwte = to_double(dwte0), dwpe = to_double(dwpe0);
  const auto d1 = to_double(dout1), d2 = to_double(dout2);

  embedding_backward_weight(dwte_g.as<bf16>(), dwpe_g.as<bf16>(), d1_g.as<bf16>(),
                            tok_g.as<std::int32_t>(), B, T, C, V, s);
  cpu::embedding_backward_weight(dwte.data(), dwpe.data(), d1.data(), tokens.data(), B, T, C);
  CONVEYOR_CHECK_CLOSE(dwte, download_bf16(dwte_g.data(), std::size_t(V) * C, s), kOneLaunchTol);
  CONVEYOR_CHECK_CLOSE(dwpe, download_bf16(dwpe_g.data(), std::size_t(maxT) * C, s),
                       kOneLaunchTol);

  embedding_backward_weight(dwte_g.as<bf16>(), dwpe_g.as<bf16>(), d2_g.as<bf16>(),
                            tok_g.as<std::int32_t>(), B, T, C, V, s);
  cpu::embedding_backward_weight(dwte.data(), dwpe.data(), d2.data(), tokens.data(), B, T, C);
  CONVEYOR_CHECK_CLOSE(dwte, download_bf16(dwte_g.data(), std::size_t(V) * C, s), kTwoLaunchTol);
  CONVEYOR_CHECK_CLOSE(dwpe, download_bf16(dwpe_g.data(), std::size_t(maxT) * C, s),
                       kTwoLaunchTol);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
