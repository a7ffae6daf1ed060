#include "kernels/cuda/bench/gpu_spin.hpp"

#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void gpu_spin(cudaStream_t stream, double microseconds) {
  cuda_detail::require(microseconds > 0, "gpu_spin", "microseconds must be positive");
  int device = 0, khz = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<long long>(microseconds * khz / 1000.0));
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
