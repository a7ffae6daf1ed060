// The FP8 casts fused into GELU and SwiGLU (kernels/cuda/fp8_fused_cast.hpp, issue 43 item
// 2) against the stand-alone path they replace: the producer's own kernel, then fp8_amax and
// cast_transpose_to_fp8 of its output. Bit for bit: the bf16 output, both copies of the
// codes (also when the output is not written), the amax; on fresh random inputs,
// vectorized and odd shapes, both formats. Then
// whole FP8 stages (GPT and Llama, dynamic and delayed scaling) with the fused casts on and
// off: every loss and gradient the same bits, and the codes made ahead taken by the layer
// that reads them.
// Every TEST_CASE name starts with "cuda fp8".
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/fp8_cast.hpp"
#include "kernels/cuda/fp8_fused_cast.hpp"
#include "kernels/cuda/model/param_store.hpp"
#include "kernels/cuda/model/stage_linears.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "tests/kernels/cuda/cuda_stage_test_support.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;
using Op = Fp8Producer::Op;

const char* op_name(Op op) {
  switch (op) {
    case Op::gelu: return "gelu";
    case Op::gelu_backward: return "gelu_backward";
    case Op::swiglu: return "swiglu";
    case Op::swiglu_backward: return "swiglu_backward";
  }
  return "?";
}

// The inputs of one producer over (rows, cols) outputs, fresh random values.
struct Inputs {
  DeviceBuffer a, b;
  std::size_t a_elems = 0;
};
Inputs inputs_for(Op op, int rows, int cols, std::uint64_t seed, cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * cols;
  Inputs in;
  switch (op) {
    case Op::gelu: in.a_elems = n; break;
    case Op::gelu_backward: in.a_elems = n; in.b = upload_bf16(random_bf16(n, seed + 1, 2.0), s); break;
    case Op::swiglu: in.a_elems = 2 * n; break;
    case Op::swiglu_backward: in.a_elems = n / 2; in.b = upload_bf16(random_bf16(n, seed + 1, 2.0), s); break;
  }
  in.a = upload_bf16(random_bf16(in.a_elems, seed, 2.0), s);
  return in;
}

struct Result {
  std::vector<std::uint16_t> y;
  std::vector<std::uint8_t> codes, codes_t;
  float amax;
};

Result fetch(const DeviceBuffer& y, const DeviceBuffer& codes, const DeviceBuffer& codes_t,
             const DeviceBuffer& amax, std::size_t n, cudaStream_t s) {
  return {download<std::uint16_t>(y.data(), n, s), download<std::uint8_t>(codes.data(), n, s),
          download<std::uint8_t>(codes_t.data(), n, s), download_f32(amax.data(), 1, s)[0]};
}

TEST_CASE("cuda fp8 casts fused into GELU and SwiGLU write the stand-alone kernels' output, codes and amax bit for bit") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int dev = current_device();
  std::uint64_t seed = 500;
  // (64, 256) takes the 16-byte kernel; (37, 50) the scalar one (50 = 2 · 25: swiglu's F odd)
  for (const auto& [rows, cols] : {std::pair{64, 256}, std::pair{37, 50}})
    for (const Op op : {Op::gelu, Op::gelu_backward, Op::swiglu, Op::swiglu_backward})
      for (const Fp8Kind kind : {Fp8Kind::e4m3, Fp8Kind::e5m2}) {
        INFO(op_name(op) << " " << rows << " x " << cols << (kind == Fp8Kind::e4m3 ? " e4m3" : " e5m2"));
        const std::size_t n = std::size_t(rows) * cols;
        const Inputs in = inputs_for(op, rows, cols, ++seed, s);
        auto buffer = [&](std::size_t bytes, const char* what) { return DeviceBuffer(bytes, dev, s, what); };
        // the stand-alone path: the producer, its amax, the scale, the cast of its output
        DeviceBuffer y_ref = buffer(2 * n, "y ref"), codes_ref = buffer(n, "codes ref"),
                     codes_t_ref = buffer(n, "codes_t ref"), amax_ref = buffer(4, "amax ref"),
                     scale = buffer(4, "scale"), dequant = buffer(4, "dequant");
        produce({op, y_ref.as<bf16>(), in.a.as<bf16>(), in.b.as<bf16>()}, rows, cols, s);
        fp8_amax(amax_ref.as<float>(), y_ref.as<bf16>(), std::int64_t(n), s);
        fp8_scale_from_amax(scale.as<float>(), dequant.as<float>(), amax_ref.as<float>(), kind, s);
        cast_transpose_to_fp8(codes_ref.as<std::uint8_t>(), codes_t_ref.as<std::uint8_t>(),
                              y_ref.as<bf16>(), rows, cols, scale.as<float>(), kind, s);
        const Result ref = fetch(y_ref, codes_ref, codes_t_ref, amax_ref, n, s);
        REQUIRE(ref.amax > 0.0f);  // not a tensor of zeros
        // fused, with the scale known before (delayed scaling's pass)
        DeviceBuffer y = buffer(2 * n, "y"), codes = buffer(n, "codes"), codes_t = buffer(n, "codes_t"),
                     amax = buffer(4, "amax");
        produce_fp8({op, y.as<bf16>(), in.a.as<bf16>(), in.b.as<bf16>()}, rows, cols,
                    codes.as<std::uint8_t>(), codes_t.as<std::uint8_t>(), scale.as<float>(),
                    amax.as<float>(), kind, s);
        const Result fused = fetch(y, codes, codes_t, amax, n, s);
        CHECK(fused.y == ref.y);
        CHECK(fused.codes == ref.codes);
        CHECK(fused.codes_t == ref.codes_t);
        CHECK(fused.amax == ref.amax);
        // fused, the codes alone (delayed scaling when nothing else reads y)
        DeviceBuffer codes3 = buffer(n, "codes3"), codes3_t = buffer(n, "codes3_t"), amax3 = buffer(4, "amax3");
        produce_fp8({op, nullptr, in.a.as<bf16>(), in.b.as<bf16>()}, rows, cols,
                    codes3.as<std::uint8_t>(), codes3_t.as<std::uint8_t>(), scale.as<float>(),
                    amax3.as<float>(), kind, s);
        CHECK(download<std::uint8_t>(codes3.data(), n, s) == ref.codes);
        CHECK(download<std::uint8_t>(codes3_t.data(), n, s) == ref.codes_t);
        CHECK(download_f32(amax3.data(), 1, s)[0] == ref.amax);
        // fused, the amax only (dynamic scaling's first pass)
        DeviceBuffer y2 = buffer(2 * n, "y2"), amax2 = buffer(4, "amax2");
        produce_fp8({op, y2.as<bf16>(), in.a.as<bf16>(), in.b.as<bf16>()}, rows, cols, nullptr,
                    nullptr, nullptr, amax2.as<float>(), kind, s);
        CHECK(download<std::uint16_t>(y2.data(), n, s) == ref.y);
        CHECK(download_f32(amax2.data(), 1, s)[0] == ref.amax);
      }
}

TEST_CASE("cuda fp8 GELU's backward fused with its cast runs in place, as the layers call it") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int rows = 32, cols = 128;
  const std::size_t n = std::size_t(rows) * cols;
  const auto dy = random_bf16(n, 601, 1.0), pre = random_bf16(n, 602, 2.0);
  DeviceBuffer ref = upload_bf16(dy, s), inplace = upload_bf16(dy, s), pre_d = upload_bf16(pre, s);
  DeviceBuffer amax(4, current_device(), s, "amax");
  produce({Op::gelu_backward, ref.as<bf16>(), ref.as<bf16>(), pre_d.as<bf16>()}, rows, cols, s);
  produce_fp8({Op::gelu_backward, inplace.as<bf16>(), inplace.as<bf16>(), pre_d.as<bf16>()}, rows,
              cols, nullptr, nullptr, nullptr, amax.as<float>(), Fp8Kind::e5m2, s);
  CHECK(download<std::uint16_t>(inplace.data(), n, s) == download<std::uint16_t>(ref.data(), n, s));
}

CudaStageOptions fp8_options(bool fused, int delayed_history) {
  CudaStageOptions o = on_device(0);
  o.fp8 = Fp8Recipe{Fp8Kind::e5m2, delayed_history, fused};
  return o;
}

TEST_CASE("cuda fp8 stages train to the same bits with the casts fused into GELU and SwiGLU or not") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  for (const auto& [config, delayed] : {std::pair{kConfig, 0}, std::pair{llama_config(), 0},
                                        std::pair{kConfig, 4}, std::pair{llama_config(), 4}}) {
    INFO((config.arch == ModelArch::llama ? "llama" : "gpt2") << ", delayed history " << delayed);
    const testing::Batch batch = testing::random_batch(kB, kT, config.vocab, 91);
    auto fused = make_cuda_stage_model(config, kFull, kSeed, fp8_options(true, delayed));
    auto apart = make_cuda_stage_model(config, kFull, kSeed, fp8_options(false, delayed));
    // 3 steps: under delayed scaling the later ones cast with the slots' history
    const auto a = train(*fused, batch, 3, 3e-3), b = train(*apart, batch, 3, 3e-3);
    CHECK(a == b);
    train_micro_batch({fused.get()}, batch, /*split=*/true);
    train_micro_batch({apart.get()}, batch, /*split=*/true);
    const auto ga = cuda_stage_gradients(*fused), gb = cuda_stage_gradients(*apart);
    REQUIRE(ga.size() == gb.size());
    for (std::size_t i = 0; i < ga.size(); ++i) {
      INFO(ga[i].name);
      CHECK(values_of(ga[i].tensor) == values_of(gb[i].tensor));
    }
  }
}

TEST_CASE("cuda fp8 codes made ahead by GELU are taken by the layer that reads its output") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream s;
  GptStage host(kConfig, kFull, kSeed);
  ParamStore store(host.params(), /*master_fp32=*/true, 0, s);
  std::size_t fc1 = store.size(), fc2 = store.size();
  for (std::size_t i = 0; i < store.size(); ++i) {
    if (store.name(i).find("0.mlp.fc1.weight") != std::string::npos) fc1 = i;
    if (store.name(i).find("0.mlp.fc2.weight") != std::string::npos) fc2 = i;
  }
  REQUIRE((fc1 < store.size() && fc2 < store.size()));
  const int C = int(kConfig.d_model), H = int(kConfig.mlp_hidden()), N = 64;
  const DeviceBuffer x = upload_bf16(random_bf16(std::size_t(N) * C, 95), s);
  DeviceBuffer pre(std::size_t(N) * H * 2, 0, s, "pre"), act(std::size_t(N) * H * 2, 0, s, "act"),
      out(std::size_t(N) * C * 2, 0, s, "out"), other(std::size_t(N) * H * 2, 0, s, "other");
  const StageLinears fp8(store, 0, s, Fp8Recipe{Fp8Kind::e5m2, 0, true});
  LinearFp8Keep keep1, keep2;
  const Fp8Next next{fc2, false, &keep2};
  fp8.forward(act.as<bf16>(), pre.as<bf16>(), x.as<bf16>(), fc1, nullptr, N, C, H, &keep1, &next);
  REQUIRE(keep2.ahead_input);
  CHECK(keep2.ahead_input->has_rows());
  // codes of `act` offered for another tensor: a caller's bug, refused
  CHECK_THROWS_AS(fp8.forward(out.as<bf16>(), nullptr, other.as<bf16>(), fc2, nullptr, N, H, C, &keep2),
                  std::logic_error);
  fp8.forward(out.as<bf16>(), nullptr, act.as<bf16>(), fc2, nullptr, N, H, C, &keep2);
  CHECK(!keep2.ahead_input);
  REQUIRE(keep2.input);
  CHECK(!keep2.input->has_rows());  // only the transposed copy is kept for backward_weight
  // a tensor its producer left unwritten (codes only) is never cast from its bf16 memory
  LinearFp8Keep unwritten;
  unwritten.unwritten = act.as<bf16>();
  CHECK_THROWS_AS(fp8.forward(out.as<bf16>(), nullptr, act.as<bf16>(), fc2, nullptr, N, H, C, &unwritten),
                  std::logic_error);
  CHECK_THROWS_AS(fp8.backward_weight<float>(fc2, nullptr, out.as<bf16>(), act.as<bf16>(), N, H, C, s,
                                             &unwritten),
                  std::logic_error);
}

}  // namespace
}  // namespace conveyor
#endif
