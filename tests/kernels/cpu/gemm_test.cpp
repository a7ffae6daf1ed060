#include "kernels/cpu/gemm.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "kernels/cpu/threads.hpp"
#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

// One GEMM problem of the shapes the model uses (linear forward, input and weight grads).
struct Problem {
  bool ta, tb;
  std::int64_t m, n, k;
  std::vector<float> a, b, c0;
};

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  auto d = testing::random_vector(n, seed);
  return {d.begin(), d.end()};
}

std::vector<Problem> problems() {
  std::vector<Problem> ps;
  const std::int64_t shapes[][3] = {{256, 192, 64}, {64, 256, 256}, {256, 64, 256}, {128, 1024, 64},
                                    {33, 17, 250},  {512, 256, 64}, {64, 256, 1024}};
  std::uint64_t seed = 1;
  for (const auto& s : shapes)
    for (int t = 0; t < 3; ++t) {
      Problem p{t == 1, t == 2, s[0], s[1], s[2], {}, {}, {}};
      p.a = random_floats(static_cast<std::size_t>(p.m * p.k), seed++);
      p.b = random_floats(static_cast<std::size_t>(p.k * p.n), seed++);
      p.c0 = random_floats(static_cast<std::size_t>(p.m * p.n), seed++);
      ps.push_back(std::move(p));
    }
  return ps;
}

// C = A B + C (beta = 1, as weight gradients accumulate), repeated `reps` times.
std::vector<float> run(const Problem& p, int reps) {
  std::vector<float> c = p.c0;
  for (int r = 0; r < reps; ++r)
    cpu::gemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, p.a.data(), p.ta ? p.m : p.k, p.b.data(),
              p.tb ? p.k : p.n, 1.0f, c.data(), p.n);
  return c;
}

TEST_CASE("sgemm from 4 threads at once is bitwise equal to serial sgemm") {
  set_cpu_kernel_threads(1);
  CHECK(cpu_kernel_threads() == 1);
  const auto ps = problems();
  constexpr int kReps = 3;
  std::vector<std::vector<float>> serial;
  for (const auto& p : ps) serial.push_back(run(p, kReps));

  constexpr int kThreads = 4;
  std::vector<std::vector<std::vector<float>>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Each thread walks the problems from a different start, so different shapes overlap.
      results[t].resize(ps.size());
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const std::size_t j = (i + static_cast<std::size_t>(t) * 5) % ps.size();
        results[t][j] = run(ps[j], kReps);
      }
    });
  for (auto& th : threads) th.join();

  int mismatched = 0;
  for (int t = 0; t < kThreads; ++t)
    for (std::size_t i = 0; i < ps.size(); ++i)
      if (std::memcmp(results[t][i].data(), serial[i].data(), serial[i].size() * sizeof(float)))
        ++mismatched;
  CHECK(mismatched == 0);
}

TEST_CASE("set_cpu_kernel_threads rejects fewer than one thread") {
  CHECK_THROWS_AS(set_cpu_kernel_threads(0), std::invalid_argument);
}

}  // namespace
}  // namespace conveyor
