// CudaKvDecoder (kernels/cuda/model/cuda_kv_decoder.hpp) against KvDecoder on the CPU, on
// fresh random small models of both architectures: GPT-2 (head size 16, a vocabulary of 50
// that the LM head pads to 56), Llama with grouped-query attention (4 query heads on 2 kv
// heads, head size 64) and Llama with one kv head, head size 48 (not a multiple of 32) and
// llama3 rope scaling. A prompt read at once, then one token at a time, a chunk of 3, and
// single tokens to the end of seq_len 40 (more positions than the attention kernel's 8
// warps); every position's logits are compared. The weights are rounded to bf16 on the host
// first, so the CPU's fp32 reference and the GPU read the same weights and the difference
// is the GPU's bf16 activations alone.
// Tolerances (relative to the largest |logit| of the CPU reference, over every position):
// - GPU against the CPU: 3e-2. bf16 activations carry 2^-9 relative rounding at each of a
//   block's ~8 stored tensors and the residual stream; through 2-3 blocks that is around
//   1e-2 of the logits' scale. A token at the wrong position, a wrong kv head or a cache
//   row not read is off by O(1). (Printed with -s: calibrate on the GPU.)
// - the cached path against a full re-run of the prefix on the GPU: 1e-2. The same kernels
//   on the same rows; only the GEMMs' algorithms may differ with the number of rows (and
//   so their fp32 summation order), after which bf16 rounding may flip an ulp.
// - the decode attention kernel alone against cpu::cached_attention_forward in double on the
//   same bf16 inputs: scaled error (cuda_test_util.hpp) 1e-2, a few times the output's bf16
//   rounding (2^-9).
// Every TEST_CASE name starts with "cuda kv decoder".
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cached_attention.hpp"
#include "kernels/cuda/decode_attention.hpp"
#include "kernels/cuda/model/cuda_kv_decoder.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/kv_decoder.hpp"
#include "kernels/tensor/bf16.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

constexpr double kCpuTolerance = 3e-2;
constexpr double kRerunTolerance = 1e-2;

struct Case {
  std::string name;
  GptConfig config;
};

std::vector<Case> cases() {
  GptConfig gpt2{/*layers=*/2, /*d_model=*/64, /*heads=*/4, /*seq_len=*/40, /*vocab=*/50};
  gpt2.tie_embeddings = true;
  GptConfig gqa{/*layers=*/2, /*d_model=*/256, /*heads=*/4, /*seq_len=*/40, /*vocab=*/64};
  gqa.arch = ModelArch::llama;
  gqa.kv_heads = 2;
  gqa.ffn_dim = 96;
  gqa.rope_theta = 500.0;  // fast rotations: a position off by one shows
  GptConfig mqa = gqa;
  mqa.layers = 3;
  mqa.d_model = 192;  // head size 48
  mqa.kv_heads = 1;
  mqa.vocab = 72;
  mqa.rope_scaling = RopeScaling::llama3;
  mqa.rope_scaling_factor = 4.0;
  mqa.rope_original_max_position = 16;
  mqa.norm_eps = 1e-6;
  return {{"gpt2 (vocab 50, padded)", gpt2},
          {"llama gqa 4/2, head size 64", gqa},
          {"llama mqa 4/1, head size 48, llama3 scaling", mqa}};
}

// A stage of the whole model, every parameter moved off its init (norms and biases too) by
// noise, then rounded to bf16: what the GPU reads exactly. The matrices' noise has standard
// deviation 1/sqrt(d_model), so that each layer keeps its input's scale: logits of order 1
// and attention scores that do not single out one key. (Noise of 0.2 on a 256-wide model
// multiplied the scale by ~3 a layer; its near-argmax attention turned bf16 rounding into
// 5-16% of the logits on an H100, where the well-scaled GPT-2 case was at 1%.)
GptStage random_model(const GptConfig& c, std::mt19937_64& rng) {
  GptStage stage(c, StageSlice{0, static_cast<int>(c.layers), true, true}, rng());
  std::normal_distribution<float> vector_noise(0.0f, 0.2f);
  std::normal_distribution<float> matrix_noise(0.0f, 1.0f / std::sqrt(static_cast<float>(c.d_model)));
  for (Param& p : stage.params()) {
    auto& noise = p.value.shape().rank() >= 2 ? matrix_noise : vector_noise;
    for (float& v : p.value.f32_span()) v = round_to_bf16(v + noise(rng));
  }
  return stage;
}

std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t vocab, std::mt19937_64& rng) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
  return ids;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.f32_span()) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

// max |a - b| over two host f32 tensors of one shape (a NaN counts as infinite).
double max_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double e = std::abs(static_cast<double>(a.f32()[i]) - b.f32()[i]);
    d = std::isnan(e) ? INFINITY : std::max(d, e);
  }
  return d;
}

// Row `row` of (n, V) as a (1, V) tensor.
Tensor row_of(const Tensor& t, std::int64_t row) {
  const std::int64_t V = t.dim(1);
  Tensor out = Tensor::uninitialized({1, V});
  std::copy_n(t.f32() + row * V, V, out.f32());
  return out;
}

}  // namespace

TEST_CASE("cuda kv decoder gives the CPU KvDecoder's logits at every position, prompt and single steps") {
  CONVEYOR_REQUIRE_GPU();
  const std::uint64_t seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    const GptConfig& c = k.config;
    GptStage stage = random_model(c, rng);
    const std::int64_t T = c.seq_len, V = c.vocab;
    const auto ids = random_ids(T, V, rng);
    KvDecoder cpu(c, stage.params());
    CudaKvDecoder gpu(c, stage.params(), 0);
    CHECK(gpu.capacity() == T);
    CHECK(gpu.cache_bytes() > 0);
    // A prompt read at once, then tokens one at a time, then a chunk of 3, then singles.
    const std::int64_t prompt = 5 + static_cast<std::int64_t>(rng() % (T / 2));
    std::int64_t at = 0;
    double worst = 0, scale = 0;
    const auto read = [&](std::int64_t n) {
      const auto chunk = std::span(ids).subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
      const Tensor want = cpu.append(chunk);
      const Tensor got = gpu.append(chunk);
      REQUIRE(got.shape() == Shape{n, V});
      worst = std::max(worst, max_difference(want, got));
      scale = std::max(scale, max_abs(want));
      at += n;
      CHECK(gpu.length() == at);
    };
    read(prompt);
    for (int i = 0; i < 4; ++i) read(1);
    read(3);
    while (at < T) read(1);
    CHECK(scale > 1.0);  // logits big enough that a wrong position or head would show
    const double relative = worst / scale;
    MESSAGE(k.name << ": GPU against CPU, worst |gpu - cpu| / max |logit| = " << relative << " (max |logit| "
                   << scale << ", tolerance " << kCpuTolerance << ")");
    CHECK(relative <= kCpuTolerance);

    // A new sequence after reset(): the last position only.
    gpu.reset();
    cpu.reset();
    CHECK(gpu.length() == 0);
    const Tensor last = gpu.append(std::span(ids).first(7), /*last_only=*/true);
    REQUIRE(last.shape() == Shape{1, V});
    const Tensor want = cpu.append(std::span(ids).first(7), /*last_only=*/true);
    CHECK(max_difference(want, last) / scale <= kCpuTolerance);

    // The cache is read, not only written: another first token changes the last logits.
    gpu.reset();
    auto other = std::vector<std::int32_t>(ids.begin(), ids.begin() + 7);
    other[0] = (other[0] + 1) % static_cast<std::int32_t>(V);
    CHECK(max_difference(gpu.append(other, true), last) > 1e-3 * scale);
  }
}

TEST_CASE("cuda kv decoder's cached steps give what a full re-run over the prefix gives on the GPU") {
  CONVEYOR_REQUIRE_GPU();
  const std::uint64_t seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    const GptConfig& c = k.config;
    GptStage stage = random_model(c, rng);
    const std::int64_t T = c.seq_len;
    const auto ids = random_ids(T, c.vocab, rng);
    CudaKvDecoder cached(c, stage.params(), 0);
    CudaKvDecoder full(c, stage.params(), 0);
    const std::int64_t prompt = 3;
    const Tensor first = cached.append(std::span(ids).first(prompt));
    double worst = 0, scale = max_abs(first);
    const auto compare = [&](const Tensor& got_row, std::int64_t position) {
      full.reset();
      const Tensor want = full.append(std::span(ids).first(static_cast<std::size_t>(position + 1)), true);
      worst = std::max(worst, max_difference(want, got_row));
      scale = std::max(scale, max_abs(want));
    };
    for (std::int64_t p = 0; p < prompt; ++p) compare(row_of(first, p), p);
    for (std::int64_t p = prompt; p < T; ++p)
      compare(cached.append(std::span(ids).subspan(static_cast<std::size_t>(p), 1), true), p);
    const double relative = worst / scale;
    MESSAGE(k.name << ": cached against full re-run, worst |cached - full| / max |logit| = " << relative
                   << " (tolerance " << kRerunTolerance << ")");
    CHECK(relative <= kRerunTolerance);
  }
}

TEST_CASE("cuda kv decoder refuses positions beyond its cache, ids outside the vocabulary and a missing parameter") {
  CONVEYOR_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  const GptConfig c = cases()[1].config;
  GptStage stage = random_model(c, rng);
  CudaKvDecoder decoder(c, stage.params(), 0, 6);
  CHECK(decoder.capacity() == 6);
  const std::vector<std::int32_t> ids(7, 1);
  CHECK_THROWS_AS(decoder.append(ids), std::invalid_argument);
  CHECK(decoder.length() == 0);
  CHECK_THROWS_AS(decoder.append(std::span(ids).first(0)), std::invalid_argument);
  const std::vector<std::int32_t> bad{static_cast<std::int32_t>(c.vocab)};
  CHECK_THROWS_AS(decoder.append(bad), std::invalid_argument);
  CHECK(decoder.append(std::span(ids).first(5)).shape() == Shape{5, c.vocab});
  CHECK(decoder.append(std::span(ids).first(1), true).shape() == Shape{1, c.vocab});  // the last position
  CHECK(decoder.length() == 6);
  CHECK_THROWS_AS(decoder.append(std::span(ids).first(1)), std::invalid_argument);
  CHECK(CudaKvDecoder(c, stage.params(), 0, 10 * c.seq_len).capacity() == c.seq_len);

  GptStage no_head(c, StageSlice{0, 1, true, false}, 3);
  CHECK_THROWS_WITH_AS(CudaKvDecoder(c, no_head.params(), 0), doctest::Contains("lm_head.weight"),
                       std::invalid_argument);
}

TEST_CASE("cuda kv decoder attention kernel gives the CPU's cached attention, grouped heads, causal in the new rows") {
  CONVEYOR_REQUIRE_GPU();
  using namespace cuda_testing;
  TestStream stream;
  struct Shape4 {
    int NH, NKV, hs, pos, n;
  };
  // Head sizes below, at and above a warp (lanes holding 1, 2 or 4 dimensions, 48 with idle
  // lanes); windows shorter and longer than the kernel's 8 warps; a prompt (n > 1) at 0.
  for (const Shape4 s : {Shape4{4, 4, 16, 0, 6}, Shape4{4, 2, 64, 37, 1}, Shape4{8, 2, 48, 20, 5},
                         Shape4{4, 1, 128, 3, 2}, Shape4{2, 2, 256, 70, 3}}) {
    CAPTURE(s.NH);
    CAPTURE(s.NKV);
    CAPTURE(s.hs);
    CAPTURE(s.pos);
    CAPTURE(s.n);
    const int C = s.NH * s.hs, kv = s.NKV * s.hs, rows = s.pos + s.n;
    const std::int64_t q_stride = C + 2 * kv;  // q read from a fused [q | k | v] row
    const auto q = random_bf16(static_cast<std::size_t>(s.n * q_stride), 1 + s.hs, 1.0);
    const auto keys = random_bf16(static_cast<std::size_t>(rows * kv), 2 + s.hs, 1.0);
    const auto values = random_bf16(static_cast<std::size_t>(rows * kv), 3 + s.hs, 1.0);
    std::vector<double> want(static_cast<std::size_t>(s.n * C));
    const auto qd = to_double(q), kd = to_double(keys), vd = to_double(values);
    cpu::cached_attention_forward<double>(want.data(), qd.data(), q_stride, kd.data(), vd.data(), s.pos, s.n, C,
                                          s.NH, s.NKV);
    const DeviceBuffer q_dev = upload_bf16(q, stream), k_dev = upload_bf16(keys, stream),
                       v_dev = upload_bf16(values, stream);
    DeviceBuffer out(sizeof(bf16) * static_cast<std::size_t>(s.n * C), current_device(), stream, "test out");
    decode_attention_forward(out.as<bf16>(), q_dev.as<bf16>(), q_stride, k_dev.as<bf16>(), v_dev.as<bf16>(), s.pos,
                             s.n, C, s.NH, s.NKV, stream);
    const auto got = download_bf16(out.data(), static_cast<std::size_t>(s.n * C), stream);
    CONVEYOR_CHECK_CLOSE(want, got, 1e-2);
  }
}

}  // namespace conveyor
