// AdamW (fp32 master + bf16 copy, and all-bf16) against kernels/optim/adamw.cpp, and the
// deterministic sum of squares against a double sum; both also over bf16 gradients
// (optim.grad_dtype bf16), which they widen exactly: the very bits of the f32 forms given
// the same (bf16-exact) values.
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/grad_norm.hpp"
#include "kernels/optim/adamw.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

// 601 + 402: a 4- and an 8-element vector straddle the two runs, and a 3-element tail is
// left over.
constexpr int kDecayN = 601, kPlainN = 402, kN = kDecayN + kPlainN;

std::vector<Param> make_params(const std::vector<float>& w) {
  std::vector<Param> ps(2);
  ps[0].name = "decayed";
  ps[0].decay = true;
  ps[1].name = "plain";
  ps[1].decay = false;
  for (int i = 0; i < 2; ++i) {
    const int n = i == 0 ? kDecayN : kPlainN, off = i == 0 ? 0 : kDecayN;
    ps[i].value = Tensor::zeros({n});
    ps[i].grad = Tensor::zeros({n});
    for (int k = 0; k < n; ++k) ps[i].value.f32()[k] = w[off + k];
  }
  return ps;
}

void set_grads(std::vector<Param>& ps, const std::vector<float>& g) {
  for (int k = 0; k < kDecayN; ++k) ps[0].grad.f32()[k] = g[k];
  for (int k = 0; k < kPlainN; ++k) ps[1].grad.f32()[k] = g[kDecayN + k];
}

std::vector<double> flat_values(const std::vector<Param>& ps) {
  std::vector<double> out;
  for (const Param& p : ps)
    for (float x : p.value.f32_span()) out.push_back(x);
  return out;
}

struct Runs {
  DeviceBuffer ends, decay;
  DecayRuns view() const { return {ends.as<std::int64_t>(), decay.as<std::uint8_t>(), 2}; }
};

Runs make_runs(cudaStream_t s) {
  return {upload(std::vector<std::int64_t>{kDecayN, kN}, s),
          upload(std::vector<std::uint8_t>{1, 0}, s)};
}

TEST_CASE("cuda AdamW with fp32 master weights matches the CPU optimizer over three steps") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const auto w0 = random_bf16(kN, 51, 0.5);
  auto ps = make_params(w0);
  AdamWState state;
  AdamWConfig cfg;
  const float lr = 1e-2f, grad_scale = 0.5f;

  auto w_g = upload(w0, s);
  DeviceBuffer m_g(kN * 4, current_device(), s, "m"), v_g(kN * 4, current_device(), s, "v"),
      copy_g(kN * 2, current_device(), s, "bf16 copy");
  CUDA_CHECK(cudaMemsetAsync(m_g.data(), 0, kN * 4, s));
  CUDA_CHECK(cudaMemsetAsync(v_g.data(), 0, kN * 4, s));
  const Runs runs = make_runs(s);
  for (int step = 1; step <= 3; ++step) {
    const auto g = random_bf16(kN, 60 + step, 0.1);
    set_grads(ps, g);
    adamw_step(ps, state, cfg, lr, grad_scale);
    auto g_g = upload(g, s);
    AdamWHyper hp;
    hp.lr = lr;
    hp.beta1 = cfg.beta1;
    hp.beta2 = cfg.beta2;
    hp.eps = cfg.eps;
    hp.weight_decay = cfg.weight_decay;
    hp.grad_scale = grad_scale;
    adamw_bias_corrections(hp, step);
    adamw_update(w_g.as<float>(), copy_g.as<bf16>(), g_g.as<float>(), m_g.as<float>(),
                 v_g.as<float>(), kN, hp, runs.view(), s);
    s.sync();
  }
  const auto ref = flat_values(ps);
  const auto got = download_f32(w_g.data(), kN, s);
  CONVEYOR_CHECK_CLOSE(ref, got, 1e-5);
  // Every operation rounded on its own in the CPU's order (adamw.cu): the very bits.
  CHECK(to_double(got) == ref);
  const auto copy = download<std::uint16_t>(copy_g.data(), kN, s);
  CHECK(copy == to_bf16_bits(got));  // the compute copy is the rounded master
}

TEST_CASE("cuda AdamW with all-bf16 state matches a bf16-rounding emulation of the CPU step") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const auto w0 = random_bf16(kN, 52, 0.5);
  std::vector<float> w = w0, m(kN, 0.0f), v(kN, 0.0f);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  auto w_g = upload_bf16(w0, s);
  auto m_g = upload_bf16(m, s), v_g = upload_bf16(v, s);
  const Runs runs = make_runs(s);
  for (int step = 1; step <= 3; ++step) {
    const auto g = random_bf16(kN, 70 + step, 0.1);
    adamw_bias_corrections(hp, step);
    for (int i = 0; i < kN; ++i) {  // the CPU formula, state rounded to bf16 after each step
      const float gi = g[i] * hp.grad_scale;
      const float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
      const float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
      const float wd = i < kDecayN ? hp.weight_decay : 0.0f;
      const float upd = (mi / hp.bias_correction1) /
                            (std::sqrt(vi / hp.bias_correction2) + hp.eps) + wd * w[i];
      w[i] = round_to_bf16(w[i] - hp.lr * upd);
      m[i] = round_to_bf16(mi);
      v[i] = round_to_bf16(vi);
    }
    auto g_g = upload(g, s);
    adamw_update_bf16(w_g.as<bf16>(), g_g.as<float>(), m_g.as<bf16>(), v_g.as<bf16>(), kN, hp,
                      runs.view(), s);
    s.sync();
  }
  // No FMA contraction on the GPU (adamw.cu) and round-to-nearest-even both sides: the
  // emulation's very bits.
  CHECK(to_double(download_bf16(w_g.data(), kN, s)) == to_double(w));
  CHECK(to_double(download_bf16(m_g.data(), kN, s)) == to_double(m));
  CHECK(to_double(download_bf16(v_g.data(), kN, s)) == to_double(v));
}

TEST_CASE("cuda grad_square_sum matches a double sum and clips AdamW like clip_scale") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const std::int64_t n = 300001;  // several elements per thread, odd tail
  const auto x = random_bf16(static_cast<std::size_t>(n), 81, 2.0);
  double ref = 0;
  for (float v : x) ref += static_cast<double>(v) * v;
  auto x_g = upload(x, s);
  DeviceBuffer sum(4, current_device(), s, "sum");
  grad_square_sum(sum.as<float>(), x_g.as<float>(), n, false, s);
  CHECK(download_f32(sum.data(), 1, s)[0] == doctest::Approx(ref).epsilon(1e-5));
  grad_square_sum(sum.as<float>(), x_g.as<float>(), 1000, true, s);  // += a prefix
  double ref2 = ref;
  for (int i = 0; i < 1000; ++i) ref2 += static_cast<double>(x[i]) * x[i];
  CHECK(download_f32(sum.data(), 1, s)[0] == doctest::Approx(ref2).epsilon(1e-5));

  // Device-side clipping gives the same update as a host grad_scale of clip_scale(norm).
  const int k = kN;
  const auto w0 = random_bf16(k, 82, 0.5), g = random_bf16(k, 83, 1.0);
  double gss = 0;
  for (float v : g) gss += static_cast<double>(v) * v;
  auto g_g = upload(g, s);
  DeviceBuffer norm_sq(4, current_device(), s, "norm_sq");
  grad_square_sum(norm_sq.as<float>(), g_g.as<float>(), k, false, s);
  const Runs runs = make_runs(s);
  auto run = [&](bool device_clip) {
    auto w_g = upload(w0, s);
    DeviceBuffer m_g(k * 4, current_device(), s, "m"), v_g(k * 4, current_device(), s, "v");
    CUDA_CHECK(cudaMemsetAsync(m_g.data(), 0, k * 4, s));
    CUDA_CHECK(cudaMemsetAsync(v_g.data(), 0, k * 4, s));
    AdamWHyper hp;
    hp.lr = 1e-2f;
    adamw_bias_corrections(hp, 1);
    if (device_clip) {
      hp.grad_norm_sq = norm_sq.as<float>();
      hp.max_grad_norm = 1.0f;
    } else {
      hp.grad_scale = clip_scale(std::sqrt(gss), 1.0);
    }
    adamw_update(w_g.as<float>(), nullptr, g_g.as<float>(), m_g.as<float>(), v_g.as<float>(), k,
                 hp, runs.view(), s);
    return download_f32(w_g.data(), k, s);
  };
  const auto host_clipped = run(false), device_clipped = run(true);
  CONVEYOR_CHECK_CLOSE(to_double(host_clipped), device_clipped, 1e-5);
}

TEST_CASE("cuda grad_square_sum over bf16 gradients matches a double sum and its f32 form") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const std::int64_t n = 300001;  // several elements per thread, odd tail
  const auto x = random_bf16(static_cast<std::size_t>(n), 131, 2.0);
  double ref = 0;
  for (float v : x) ref += static_cast<double>(v) * v;
  auto x16 = upload_bf16(x, s), x32 = upload(x, s);
  DeviceBuffer sums(8, current_device(), s, "sums");
  grad_square_sum(sums.as<float>(), x16.as<bf16>(), n, false, s);
  grad_square_sum(sums.as<float>() + 1, x32.as<float>(), n, false, s);
  const auto got = download_f32(sums.data(), 2, s);
  CHECK(got[0] == doctest::Approx(ref).epsilon(1e-5));
  CHECK(got[0] == got[1]);
  grad_square_sum(sums.as<float>(), x16.as<bf16>(), 1000, true, s);  // += a prefix
  double ref2 = ref;
  for (int i = 0; i < 1000; ++i) ref2 += static_cast<double>(x[i]) * x[i];
  CHECK(download_f32(sums.data(), 1, s)[0] == doctest::Approx(ref2).epsilon(1e-5));
}

TEST_CASE("cuda grad_square_sums of a buffer's segments equal one grad_square_sum per segment bitwise") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  // A model's parameters in one flat buffer: empty, tiny, a partial block, one larger than
  // a whole sweep of the grid (512 x 256) with an odd tail, and gaps of padding between.
  const std::vector<std::int64_t> offsets = {0, 8, 8, 2056, 2100, 140000};
  const std::vector<std::int64_t> counts = {5, 0, 2048, 3, 137001, 300007};
  const std::size_t total = 440016;
  const auto x = random_bf16(total, 151, 1.5);
  auto x16 = upload_bf16(x, s), x32 = upload(x, s);
  const int n = static_cast<int>(counts.size());
  std::vector<std::int64_t> table(offsets);
  table.insert(table.end(), counts.begin(), counts.end());
  auto table_g = upload(table, s);
  DeviceBuffer partials(grad_square_sum_partials(n) * sizeof(float), current_device(), s, "partials");
  const SquareSumSegments segments{table_g.as<std::int64_t>(), table_g.as<std::int64_t>() + n,
                                   partials.as<float>(), n};
  DeviceBuffer batched(2 * n * sizeof(float), current_device(), s, "batched");
  DeviceBuffer single(2 * n * sizeof(float), current_device(), s, "single");
  grad_square_sums(batched.as<float>(), x16.as<bf16>(), segments, s);
  grad_square_sums(batched.as<float>() + n, x32.as<float>(), segments, s);
  for (int i = 0; i < n; ++i) {
    grad_square_sum(single.as<float>() + i, x16.as<bf16>() + offsets[i], counts[i], false, s);
    grad_square_sum(single.as<float>() + n + i, x32.as<float>() + offsets[i], counts[i], false, s);
  }
  const auto got = download_f32(batched.data(), 2 * n, s);
  const auto want = download_f32(single.data(), 2 * n, s);
  for (int i = 0; i < n; ++i) {
    double ref = 0;
    for (std::int64_t k = 0; k < counts[i]; ++k)
      ref += static_cast<double>(x[offsets[i] + k]) * x[offsets[i] + k];
    INFO("segment " << i << " of " << counts[i] << " elements");
    CHECK(got[i] == want[i]);          // bf16 gradients
    CHECK(got[n + i] == want[n + i]);  // f32 gradients
    CHECK(got[i] == got[n + i]);
    CHECK(got[i] == doctest::Approx(ref).epsilon(1e-5));
  }
  const SquareSumSegments too_many{segments.offsets, segments.counts, segments.partials, 65536};
  CHECK_THROWS_AS(grad_square_sums(batched.as<float>(), x16.as<bf16>(), too_many, s),
                  std::invalid_argument);
}

TEST_CASE("cuda AdamW over bf16 gradients matches the CPU and the f32-gradient form bitwise") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int dev = current_device();
  const auto w0 = random_bf16(kN, 141, 0.5);
  auto ps = make_params(w0);
  AdamWState state;
  AdamWConfig cfg;
  const float lr = 1e-2f, grad_scale = 0.5f;
  const Runs runs = make_runs(s);
  auto zeros = [&](std::size_t bytes) {
    DeviceBuffer b(bytes, dev, s, "zeroed state");
    CUDA_CHECK(cudaMemsetAsync(b.data(), 0, bytes, s));
    return b;
  };
  // Per gradient type (16: bf16, 32: f32): fp32 master (master, copy, m, v) and all-bf16
  // (params, m, v), all starting from w0.
  auto master16 = upload(w0, s), master32 = upload(w0, s);
  DeviceBuffer copy16(kN * 2, dev, s, "copy"), copy32(kN * 2, dev, s, "copy");
  auto m16 = zeros(kN * 4), v16 = zeros(kN * 4), m32 = zeros(kN * 4), v32 = zeros(kN * 4);
  auto p16 = upload_bf16(w0, s), p32 = upload_bf16(w0, s);
  auto bm16 = zeros(kN * 2), bv16 = zeros(kN * 2), bm32 = zeros(kN * 2), bv32 = zeros(kN * 2);
  for (int step = 1; step <= 3; ++step) {
    const auto g = random_bf16(kN, 150 + step, 0.1);
    set_grads(ps, g);
    adamw_step(ps, state, cfg, lr, grad_scale);
    auto g16 = upload_bf16(g, s), g32 = upload(g, s);
    AdamWHyper hp;
    hp.lr = lr;
    hp.beta1 = cfg.beta1;
    hp.beta2 = cfg.beta2;
    hp.eps = cfg.eps;
    hp.weight_decay = cfg.weight_decay;
    hp.grad_scale = grad_scale;
    adamw_bias_corrections(hp, step);
    adamw_update(master16.as<float>(), copy16.as<bf16>(), g16.as<bf16>(), m16.as<float>(),
                 v16.as<float>(), kN, hp, runs.view(), s);
    adamw_update(master32.as<float>(), copy32.as<bf16>(), g32.as<float>(), m32.as<float>(),
                 v32.as<float>(), kN, hp, runs.view(), s);
    adamw_update_bf16(p16.as<bf16>(), g16.as<bf16>(), bm16.as<bf16>(), bv16.as<bf16>(), kN, hp,
                      runs.view(), s);
    adamw_update_bf16(p32.as<bf16>(), g32.as<float>(), bm32.as<bf16>(), bv32.as<bf16>(), kN, hp,
                      runs.view(), s);
    s.sync();
  }
  const auto ref = flat_values(ps);
  auto bits = [&](const DeviceBuffer& b) { return download<std::uint16_t>(b.data(), kN, s); };
  auto floats = [&](const DeviceBuffer& b) { return download_f32(b.data(), kN, s); };
  // fp32 master: as close to the CPU as the f32-gradient test above (1e-5), and its bits.
  CONVEYOR_CHECK_CLOSE(ref, floats(master16), 1e-5);
  CHECK(floats(master16) == floats(master32));
  CHECK(bits(copy16) == bits(copy32));
  CHECK(floats(m16) == floats(m32));
  CHECK(floats(v16) == floats(v32));
  // All-bf16: weights and moments rounded to bf16 at each of 3 steps (2^-8 relative each),
  // against the fp32 CPU optimizer; and the bits of the f32-gradient form.
  CONVEYOR_CHECK_CLOSE(ref, download_bf16(p16.data(), kN, s), 2e-2);
  CHECK(bits(p16) == bits(p32));
  CHECK(bits(bm16) == bits(bm32));
  CHECK(bits(bv16) == bits(bv32));
}

// The launchers pick 8 elements per thread for 16-byte aligned buffers, 4 for buffers
// aligned to 4 elements, one otherwise: the same update, so the same bits. Buffers offset
// by 4 and by 1 element force the narrower kernels.
TEST_CASE("cuda AdamW gives the same bits 8, 4 and 1 element per thread") {
  CONVEYOR_REQUIRE_GPU();
  TestStream s;
  const int dev = current_device();
  const auto w0 = random_bf16(kN, 171, 0.5);
  const Runs runs = make_runs(s);
  const DeviceBuffer w0_g = upload_bf16(w0, s);
  std::vector<std::vector<std::uint16_t>> results;
  for (int offset : {0, 4, 1}) {
    CAPTURE(offset);
    const std::size_t bytes = (kN + 8) * 2;
    DeviceBuffer p(bytes, dev, s, "params"), m(bytes, dev, s, "m"), v(bytes, dev, s, "v"),
        g(bytes, dev, s, "grads");
    auto at = [&](DeviceBuffer& b) { return b.as<bf16>() + offset; };
    CUDA_CHECK(cudaMemcpyAsync(at(p), w0_g.data(), kN * 2, cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemsetAsync(m.data(), 0, bytes, s));
    CUDA_CHECK(cudaMemsetAsync(v.data(), 0, bytes, s));
    AdamWHyper hp;
    hp.lr = 1e-2f;
    for (int step = 1; step <= 2; ++step) {
      const auto grads = upload_bf16(random_bf16(kN, 180 + step, 0.1), s);
      CUDA_CHECK(cudaMemcpyAsync(at(g), grads.data(), kN * 2, cudaMemcpyDeviceToDevice, s));
      adamw_bias_corrections(hp, step);
      adamw_update_bf16(at(p), at(g), at(m), at(v), kN, hp, runs.view(), s);
      s.sync();
    }
    std::vector<std::uint16_t> all = download<std::uint16_t>(at(p), kN, s);
    for (DeviceBuffer* b : {&m, &v}) {
      const auto part = download<std::uint16_t>(at(*b), kN, s);
      all.insert(all.end(), part.begin(), part.end());
    }
    results.push_back(std::move(all));
  }
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
