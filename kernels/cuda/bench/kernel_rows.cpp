#include "kernels/cuda/bench/kernel_rows.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "kernels/cuda/bench/gpu_spin.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/tensor/bf16.hpp"

namespace conveyor::kernel_bench {
namespace {

constexpr std::size_t kFillChunk = std::size_t{16} << 20;  // bytes of random host data
constexpr double kSpinMicroseconds = 300;  // well above any launch's host time

}  // namespace

RandomBuffer::RandomBuffer(std::size_t count, bool bf16, float scale, std::uint64_t seed,
                           int device, cudaStream_t stream)
    : buffer_(count * (bf16 ? 2 : 4), device, stream, "kernel bench input") {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  const std::size_t bytes = count * (bf16 ? 2 : 4);
  std::vector<unsigned char> host(std::min(bytes, kFillChunk));
  for (std::size_t i = 0; i + (bf16 ? 2 : 4) <= host.size(); i += bf16 ? 2 : 4) {
    float x = dist(rng);
    if (x == 0.0f) x = scale * 1e-3f;
    if (bf16) {
      const std::uint16_t b = float_to_bf16_bits(x);
      std::memcpy(&host[i], &b, 2);
    } else {
      std::memcpy(&host[i], &x, 4);
    }
  }
  for (std::size_t at = 0; at < bytes; at += host.size())
    CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(buffer_.data()) + at, host.data(),
                               std::min(host.size(), bytes - at), cudaMemcpyHostToDevice,
                               stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));  // `host` goes away
}

KernelRows::KernelRows(int device, int repeats) : device_(device), repeats_(repeats) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreate(&start_));
  CUDA_CHECK(cudaEventCreate(&stop_));
}

KernelRows::~KernelRows() {
  (void)cudaStreamSynchronize(stream_);
  (void)cudaEventDestroy(start_);
  (void)cudaEventDestroy(stop_);
  (void)cudaStreamDestroy(stream_);
}

RandomBuffer KernelRows::bf16(std::size_t count, float scale) {
  return RandomBuffer(count, true, scale, seed_++, device_, stream_);
}

RandomBuffer KernelRows::f32(std::size_t count, float scale) {
  return RandomBuffer(count, false, scale, seed_++, device_, stream_);
}

DeviceBuffer KernelRows::ids(std::size_t count, std::int64_t vocab) {
  std::mt19937_64 rng(seed_++);
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::int32_t> host(count);
  for (auto& id : host) id = dist(rng);
  DeviceBuffer buf(count * 4, device_, stream_, "kernel bench ids");
  CUDA_CHECK(cudaMemcpyAsync(buf.data(), host.data(), count * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return buf;
}

double KernelRows::median_ms(const std::function<void()>& launch) {
  for (int i = 0; i < 3; ++i) launch();
  std::vector<double> ms;
  for (int i = 0; i < repeats_; ++i) {
    gpu_spin(stream_, kSpinMicroseconds);
    CUDA_CHECK(cudaEventRecord(start_, stream_));
    launch();
    CUDA_CHECK(cudaEventRecord(stop_, stream_));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float t = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void KernelRows::add(std::string name, std::string group, int per_step, double flops,
                     double bytes, const std::function<void()>& launch, std::string master,
                     std::string grad_dtype) {
  rows_.push_back({std::move(name), std::move(group), per_step, median_ms(launch), flops, bytes,
                   std::move(master), std::move(grad_dtype)});
}

}  // namespace conveyor::kernel_bench
