#pragma once
// Helpers for the CUDA kernel tests: GPU detection, bf16-exact random inputs, device
// upload/download, and a tolerance check suited to bf16 outputs.
// Every TEST_CASE here starts with "cuda " so `kernels_tests -tc='cuda *'` selects them, and
// begins with CONVEYOR_REQUIRE_GPU() (doctest has no skip: it logs and returns).
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/allocator.hpp"
#include "kernels/tensor/bf16.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor::cuda_testing {

inline bool has_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define CONVEYOR_REQUIRE_GPU()                        \
  do {                                                \
    if (!::conveyor::cuda_testing::has_gpu()) {       \
      MESSAGE("skipped: no GPU");                     \
      return;                                         \
    }                                                 \
  } while (0)

/// A stream owned by the test.
struct TestStream {
  cudaStream_t s = nullptr;
  TestStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~TestStream() {
    (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  operator cudaStream_t() const { return s; }
  void sync() const { CUDA_CHECK(cudaStreamSynchronize(s)); }
};

/// Normal(mean, stddev) values rounded to bf16, so the CPU reference and the GPU see
/// exactly the same inputs; never exactly zero.
inline std::vector<float> random_bf16(std::size_t n, std::uint64_t seed, double stddev = 1.0,
                                      double mean = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) {
    double d = dist(rng);
    if (d == 0.0) d = stddev * 1e-3;
    x = round_to_bf16(static_cast<float>(d));
  }
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T>
DeviceBuffer upload(const std::vector<T>& host, cudaStream_t stream) {
  DeviceBuffer buf(host.size() * sizeof(T), current_device(), stream, "test upload");
  CUDA_CHECK(cudaMemcpyAsync(buf.data(), host.data(), host.size() * sizeof(T),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector may go away
  return buf;
}

inline DeviceBuffer upload_bf16(const std::vector<float>& host, cudaStream_t stream) {
  return upload(to_bf16_bits(host), stream);
}

template <class T>
std::vector<T> download(const void* dev, std::size_t n, cudaStream_t stream) {
  std::vector<T> host(n);
  CUDA_CHECK(cudaMemcpyAsync(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

inline std::vector<float> download_bf16(const void* dev, std::size_t n, cudaStream_t stream) {
  return from_bf16_bits(download<std::uint16_t>(dev, n, stream));
}

inline std::vector<float> download_f32(const void* dev, std::size_t n, cudaStream_t stream) {
  return download<float>(dev, n, stream);
}

/// Worst of |got - ref| / (|ref| + rms(ref)) over the elements: relative where values are
/// large, scaled by the tensor's typical size where they are near zero (bf16 outputs have
/// ~2^-8 relative rounding on each element, whatever its size).
inline double scaled_error(const std::vector<double>& ref, const std::vector<float>& got) {
  REQUIRE(ref.size() == got.size());
  double ss = 0;
  for (double r : ref) ss += r * r;
  const double rms = std::sqrt(ss / std::max<std::size_t>(1, ref.size())) + 1e-30;
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(static_cast<double>(got[i]) - ref[i]) / (std::abs(ref[i]) + rms);
    if (std::isnan(e)) return INFINITY;  // a NaN fails any tolerance
    worst = std::max(worst, e);
  }
  return worst;
}

/// CHECKs scaled_error(ref, got) < tol and always logs the value (the margin is worth
/// seeing on a new GPU or library version; ctest hides it unless asked).
#define CONVEYOR_CHECK_CLOSE(ref, got, tol)                                            \
  do {                                                                                 \
    const double conveyor_err_ = ::conveyor::cuda_testing::scaled_error((ref), (got)); \
    MESSAGE(#got " scaled error " << conveyor_err_ << " (tolerance " << (tol) << ")"); \
    CHECK(conveyor_err_ < (tol));                                                      \
  } while (0)

inline bool same_bytes(const void* a, const void* b, std::size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

}  // namespace conveyor::cuda_testing
