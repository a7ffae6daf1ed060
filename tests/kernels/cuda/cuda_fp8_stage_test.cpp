// precision.matmul fp8 (issue 43) in the CUDA stage: the per-tensor quantization the
// linear layers use (fp8_quantize.hpp) against the CPU reference of FP8 rounding, bit for
// bit; StageLinears' weight copies made once per change of the weights, not per
// micro-batch; and GPT and Llama stages in FP8 against the same stages in bf16: close
// losses and gradients (relative L2 distance, stated per check: FP8's 3 and 2 mantissa bits
// give a few per cent; a wrong scale, layout or format gives order 1), a training curve that
// follows bf16's, and bitwise-repeatable runs.
// Every TEST_CASE name starts with "cuda fp8".
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/fp8.hpp"
#include "kernels/cpu/fp8_scaling.hpp"
#include "kernels/cuda/fp8_delayed_scale.hpp"
#include "kernels/cuda/fp8_quantize.hpp"
#include "kernels/cuda/model/param_store.hpp"
#include "kernels/cuda/model/stage_linears.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "tests/kernels/cuda/cuda_stage_test_support.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

// |a - b| / |b| over all elements together.
double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// amax, scale, dequantization factor of a quantized tensor.
std::vector<float> scales_of(const Fp8Tensor& q, cudaStream_t s) {
  return {download_f32(q.amax(), 1, s)[0], download_f32(q.scale(), 1, s)[0],
          download_f32(q.dequant(), 1, s)[0]};
}

CudaStageOptions fp8_options(Fp8Kind grad = Fp8Kind::e5m2, int delayed_history = 0) {
  CudaStageOptions o = on_device(0);
  o.fp8 = Fp8Recipe{grad, delayed_history};
  return o;
}

TEST_CASE("cuda fp8 quantization of a tensor matches the CPU reference bit for bit") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream s;
  // multiples of 8 take the 64 x 64 tiles of 16-byte loads (edge tiles partly outside),
  // 30 x 18 the scalar 32 x 32 tiles
  for (const auto& [rows, cols] : {std::pair{48, 80}, std::pair{136, 200}, std::pair{30, 18}})
  for (const auto& [kind, format] :
       {std::pair{Fp8Kind::e4m3, cpu::kE4M3}, std::pair{Fp8Kind::e5m2, cpu::kE5M2}}) {
    INFO(format.name << ", " << rows << " x " << cols);
    const std::vector<float> x = random_bf16(std::size_t(rows) * cols, 71, 3.0);
    const DeviceBuffer xd = upload_bf16(x, s);
    const Fp8Tensor q(xd.as<bf16>(), rows, cols, kind, Fp8Copies::both, current_device(), s, "x");
    const auto scales = scales_of(q, s);
    const float amax = cpu::fp8_amax(x.data(), std::int64_t(x.size()));
    const float scale = cpu::fp8_scale_for(amax, format);
    CHECK(scales[0] == amax);
    CHECK(scales[1] == scale);
    CHECK(scales[2] == 1.0f / scale);
    const auto codes = download<std::uint8_t>(q.operand().data, x.size(), s);
    const auto codes_t = download<std::uint8_t>(q.transposed().data, x.size(), s);
    int wrong = 0, wrong_t = 0;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const std::uint8_t want = cpu::quantize_fp8(x[std::size_t(r) * cols + c], scale, format);
        wrong += codes[std::size_t(r) * cols + c] != want;
        wrong_t += codes_t[std::size_t(c) * rows + r] != want;
      }
    CHECK(wrong == 0);
    CHECK(wrong_t == 0);
  }
}

TEST_CASE("cuda fp8 quantization turns an overflow upstream into a NaN dequantization factor") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream s;
  std::vector<float> x = random_bf16(32 * 16, 72);
  x[77] = std::numeric_limits<float>::infinity();
  const DeviceBuffer xd = upload_bf16(x, s);
  const Fp8Tensor q(xd.as<bf16>(), 32, 16, Fp8Kind::e4m3, Fp8Copies::rows, current_device(), s,
                    "x");
  const auto scales = scales_of(q, s);
  CHECK(std::isinf(scales[0]));
  CHECK(scales[1] == 1.0f);
  CHECK(std::isnan(scales[2]));  // a GEMM reading this writes NaN: the NaN policy sees it
}

TEST_CASE("cuda fp8 delayed scaling follows the CPU amax history, and casts with its scale") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream s;
  constexpr int rows = 32, cols = 48, kHistory = 3;
  DelayedScale slot(kHistory, Fp8Kind::e5m2, current_device(), s);
  cpu::AmaxHistory history(kHistory);
  // Step amaxes that rise and fall, so the window's maximum leaves it; a step with an
  // overflow, which is not recorded and whose cast hands its GEMM a NaN factor.
  const std::vector<double> stddevs{1.0, 8.0, 0.5, 0.25, 0.25, 2.0};
  for (std::size_t step = 0; step < stddevs.size() + 1; ++step) {
    INFO("step " << step);
    const bool overflow = step == 3;
    float step_amax = 0;
    for (int micro = 0; micro < 2; ++micro) {
      std::vector<float> x = random_bf16(std::size_t(rows) * cols, 100 * step + micro,
                                         stddevs[std::min(step, stddevs.size() - 1)]);
      if (overflow && micro == 1) x[5] = -std::numeric_limits<float>::infinity();
      const DeviceBuffer xd = upload_bf16(x, s);
      const float scale = step == 0 ? 0.0f : download_f32(slot.scale(), 1, s)[0];
      const Fp8Tensor q(xd.as<bf16>(), rows, cols, slot, Fp8Copies::rows, current_device(), s, "x");
      const auto own = scales_of(q, s);
      const float amax = cpu::fp8_amax(x.data(), std::int64_t(x.size()));
      CHECK(own[0] == amax);
      step_amax = std::max(step_amax, amax);
      if (step == 0) {
        CHECK(own[1] == cpu::fp8_scale_for(amax, cpu::kE5M2));  // no history: dynamic
        continue;
      }
      CHECK(scale == history.scale(cpu::kE5M2));
      if (overflow && micro == 1) {
        CHECK(std::isnan(own[2]));
        step_amax = amax;  // inf: the step's record is refused below
      } else {
        CHECK(own[2] == 1.0f / scale);
      }
      const auto codes = download<std::uint8_t>(q.operand().data, x.size(), s);
      int wrong = 0;
      for (std::size_t i = 0; i < x.size(); ++i)
        wrong += codes[i] != cpu::quantize_fp8(x[i], scale, cpu::kE5M2);
      CHECK(wrong == 0);
    }
    history.record(step_amax);
    slot.roll(s);
  }
}

TEST_CASE("cuda fp8 stage linears cast each weight once per change of the weights") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream s;
  GptStage host(kConfig, kFull, kSeed);
  ParamStore store(host.params(), /*master_fp32=*/true, 0, s);
  std::size_t fc1 = store.size();
  for (std::size_t i = 0; i < store.size(); ++i)
    if (store.name(i).find("0.mlp.fc1.weight") != std::string::npos) fc1 = i;
  REQUIRE(fc1 < store.size());
  const int C = int(kConfig.d_model), H = int(kConfig.mlp_hidden()), N = 64;
  const StageLinears fp8(store, 0, s, Fp8Recipe{});
  const DeviceBuffer x = upload_bf16(random_bf16(std::size_t(N) * C, 73), s);
  const DeviceBuffer dy = upload_bf16(random_bf16(std::size_t(N) * H, 74, 0.1), s);
  DeviceBuffer out(std::size_t(N) * H * 2, 0, s, "out"), dx(std::size_t(N) * C * 2, 0, s, "dx");
  auto micro_batch = [&] {
    fp8.forward(out.as<bf16>(), nullptr, x.as<bf16>(), fc1, nullptr, N, C, H);
    fp8.backward_input(dx.as<bf16>(), dy.as<bf16>(), fc1, nullptr, N, C, H);
    fp8.backward_weight<float>(fc1, nullptr, dy.as<bf16>(), x.as<bf16>(), N, C, H, s);
  };
  for (int m = 0; m < 3; ++m) micro_batch();
  CHECK(fp8.weight_casts() == 1);
  const auto before = download_bf16(out.data(), std::size_t(N) * H, s);
  store.step(AdamWConfig{}, 1e-2, 1.0f);  // the weights change: new copies
  for (int m = 0; m < 3; ++m) micro_batch();
  CHECK(fp8.weight_casts() == 2);
  CHECK(relative_l2(download_bf16(out.data(), std::size_t(N) * H, s), before) > 0);
  // and the forward in FP8 is the bf16 forward within FP8's rounding
  const StageLinears bf16_linears(store, 0, s, std::nullopt);
  DeviceBuffer ref(std::size_t(N) * H * 2, 0, s, "ref");
  bf16_linears.forward(ref.as<bf16>(), nullptr, x.as<bf16>(), fc1, nullptr, N, C, H);
  fp8.forward(out.as<bf16>(), nullptr, x.as<bf16>(), fc1, nullptr, N, C, H);
  const double err = relative_l2(download_bf16(out.data(), std::size_t(N) * H, s),
                                 download_bf16(ref.data(), std::size_t(N) * H, s));
  MESSAGE("fc1 forward, fp8 against bf16: relative L2 " << err);
  CHECK(err < 0.08);
}

TEST_CASE("cuda fp8 weight gradients from the kept codes equal a fresh cast's, bit for bit") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  TestStream s;
  GptStage host(kConfig, kFull, kSeed);
  ParamStore store(host.params(), /*master_fp32=*/true, 0, s);
  std::size_t fc1 = store.size();
  for (std::size_t i = 0; i < store.size(); ++i)
    if (store.name(i).find("0.mlp.fc1.weight") != std::string::npos) fc1 = i;
  REQUIRE(fc1 < store.size());
  const int C = int(kConfig.d_model), H = int(kConfig.mlp_hidden()), N = 64;
  const DeviceBuffer x = upload_bf16(random_bf16(std::size_t(N) * C, 75), s);
  const DeviceBuffer dy = upload_bf16(random_bf16(std::size_t(N) * H, 76, 0.1), s);
  DeviceBuffer out(std::size_t(N) * H * 2, 0, s, "out"), dx(std::size_t(N) * C * 2, 0, s, "dx");
  for (const int delayed : {0, 4}) {
    INFO("delayed history " << delayed);
    const StageLinears fp8(store, 0, s, Fp8Recipe{Fp8Kind::e5m2, delayed});
    // one micro-batch, its codes kept or not; the weight gradient it adds
    auto weight_grad = [&](bool keep_codes) {
      LinearFp8Keep keep;
      LinearFp8Keep* k = keep_codes ? &keep : nullptr;
      fp8.forward(out.as<bf16>(), nullptr, x.as<bf16>(), fc1, nullptr, N, C, H, k);
      fp8.backward_input(dx.as<bf16>(), dy.as<bf16>(), fc1, nullptr, N, C, H, k);
      if (keep_codes) CHECK((keep.input && keep.output_grad));
      fp8.backward_weight<float>(fc1, nullptr, dy.as<bf16>(), x.as<bf16>(), N, C, H, s, k);
      const auto g = download_f32(store.grad<float>(fc1), std::size_t(H) * C, s);
      store.discard_grads();
      return g;
    };
    if (delayed) {  // a step of history, so both casts below use the slot's delayed scale
      weight_grad(false);
      store.step(AdamWConfig{}, 1e-2, 1.0f);
    }
    const auto cast_again = weight_grad(false), kept = weight_grad(true);
    CHECK(relative_l2(kept, std::vector<float>(kept.size(), 0.0f)) > 0);  // a real gradient
    CHECK(kept == cast_again);
  }
}

// One micro-batch through a whole-model stage: its loss and every weight gradient.
struct Pass {
  double loss;
  std::vector<NamedTensor> grads;
};
Pass one_pass(const GptConfig& config, const CudaStageOptions& options,
              const testing::Batch& batch) {
  auto model = make_cuda_stage_model(config, kFull, kSeed, options);
  Pass p;
  p.loss = train_micro_batch({model.get()}, batch, /*split=*/true);
  p.grads = cuda_stage_gradients(*model);
  return p;
}

void check_fp8_close_to_bf16(const GptConfig& config, double grad_tolerance) {
  const testing::Batch batch = testing::random_batch(kB, kT, config.vocab, 81);
  for (Fp8Kind grad : {Fp8Kind::e5m2, Fp8Kind::e4m3}) {
    INFO((grad == Fp8Kind::e5m2 ? "gradients e5m2" : "gradients e4m3"));
    const Pass ref = one_pass(config, on_device(0), batch);
    const Pass fp8 = one_pass(config, fp8_options(grad), batch);
    MESSAGE("loss bf16 " << ref.loss << ", fp8 " << fp8.loss);
    CHECK(std::abs(fp8.loss - ref.loss) < 1e-2 * std::abs(ref.loss));
    REQUIRE(ref.grads.size() == fp8.grads.size());
    double worst = 0;
    std::string worst_name;
    for (std::size_t i = 0; i < ref.grads.size(); ++i) {
      const double e = relative_l2(values_of(fp8.grads[i].tensor), values_of(ref.grads[i].tensor));
      if (e > worst) worst = e, worst_name = ref.grads[i].name;
    }
    MESSAGE("worst gradient, fp8 against bf16: " << worst_name << " relative L2 " << worst);
    CHECK(worst < grad_tolerance);
  }
}

// The gradients' tolerance: e5m2 keeps 2 mantissa bits (up to 2^-3 relative rounding of
// each element), and a gradient of block 0 has passed through the FP8 casts of every block
// above it; a bias's or a norm's gradient sums over tokens terms that partly cancel, which
// magnifies the relative error. Measured on an H100 (2026-12-07): worst 0.09 to 0.154
// (blocks.0.ln1.bias) for the GPT, 0.10 to 0.12 (gate_up) for the Llama, over two runs.
constexpr double kFp8GradTolerance = 0.25;

TEST_CASE("cuda fp8 GPT stage: loss and every gradient close to the bf16 stage's") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  check_fp8_close_to_bf16(kConfig, kFp8GradTolerance);
}

TEST_CASE("cuda fp8 llama stage: loss and every gradient close to the bf16 stage's") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  check_fp8_close_to_bf16(llama_config(), kFp8GradTolerance);
}

TEST_CASE("cuda fp8 training follows the bf16 curve and repeats bit for bit") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  for (const auto& [config, delayed] : {std::pair{kConfig, 0}, std::pair{llama_config(), 0},
                                        std::pair{kConfig, 4}, std::pair{llama_config(), 4}}) {
    INFO((config.arch == ModelArch::llama ? "llama" : "gpt2") << ", delayed history " << delayed);
    const testing::Batch batch = testing::random_batch(kB, kT, config.vocab, 82);
    auto bf16_model = make_cuda_stage_model(config, kFull, kSeed, on_device(0));
    auto fp8_a = make_cuda_stage_model(config, kFull, kSeed, fp8_options(Fp8Kind::e5m2, delayed));
    auto fp8_b = make_cuda_stage_model(config, kFull, kSeed, fp8_options(Fp8Kind::e5m2, delayed));
    // At 3e-3 the Llama's bf16 run itself jumps about (4.14 -> 4.80 at step 5 on an H100,
    // 2026-12-07) and fp8 drifted 0.20 of the first loss from it while the GPT stayed within
    // 0.026: the Llama trains at 1e-3 here (not yet run on a GPU at that rate).
    const double lr = config.arch == ModelArch::llama ? 1e-3 : 3e-3;
    const auto ref = train(*bf16_model, batch, 20, lr);
    const auto a = train(*fp8_a, batch, 20, lr);
    const auto b = train(*fp8_b, batch, 20, lr);
    CHECK(a == b);
    // The gap at each step relative to the first step's loss: the runs memorize one batch,
    // so late losses are small and a gap relative to them says little.
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i)
      worst = std::max(worst, std::abs(a[i] - ref[i]) / ref.front());
    MESSAGE("losses bf16 " << fmt::format("{:.4f}", fmt::join(ref, " ")) << "\n       fp8  "
                           << fmt::format("{:.4f}", fmt::join(a, " ")) << "\nworst step gap / first loss "
                           << worst);
    CHECK(a.back() < 0.8 * a.front());  // it learns
    CHECK(worst < 0.03);
    const auto wa = fp8_a->weights(), wb = fp8_b->weights();
    REQUIRE(wa.size() == wb.size());
    for (std::size_t i = 0; i < wa.size(); ++i) {
      INFO(wa[i].name);
      CHECK(values_of(wa[i].tensor) == values_of(wb[i].tensor));
    }
  }
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
