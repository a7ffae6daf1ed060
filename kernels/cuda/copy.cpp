#include "kernels/cuda/copy.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/tensor/bf16.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"

namespace conveyor {

void copy_tensor(Tensor& dst, const Tensor& src, cudaStream_t stream) {
  if (!dst.defined() || !src.defined() || dst.dtype() != src.dtype() ||
      dst.numel() != src.numel())
    throw std::invalid_argument("copy_tensor: cannot copy " + src.describe() + " into " +
                                dst.describe());
  if (src.bytes() == 0) return;
  const Device from = src.device(), to = dst.device();
  if (from.is_cpu() && to.is_cpu()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyHostToHost, stream));
  } else if (!from.is_cpu() && !to.is_cpu() && from.index != to.index) {
    CUDA_CHECK(cudaMemcpyPeerAsync(dst.raw(), to.index, src.raw(), from.index, src.bytes(),
                                   stream));
  } else {
    DeviceGuard guard(to.is_cpu() ? from.index : to.index);
    CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDefault, stream));
  }
}

Tensor to_device(const Tensor& src, int device, cudaStream_t stream) {
  Tensor dst = empty_cuda(src.shape(), src.dtype(), device, stream, "to_device");
  copy_tensor(dst, src, stream);
  return dst;
}

Tensor to_host(const Tensor& src, cudaStream_t stream) {
  Tensor dst = Tensor::zeros(src.shape(), src.dtype());
  copy_tensor(dst, src, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return dst;
}

Tensor to_bf16_host(const Tensor& f32) {
  Tensor out = Tensor::zeros(f32.shape(), DType::bf16);
  const float* in = f32.f32();
  auto* o = static_cast<std::uint16_t*>(out.raw());
  for (std::int64_t i = 0; i < f32.numel(); ++i) o[i] = float_to_bf16_bits(in[i]);
  return out;
}

Tensor to_f32_host(const Tensor& bf16) {
  if (bf16.dtype() != DType::bf16 || !bf16.device().is_cpu())
    throw std::invalid_argument("to_f32_host: need a bf16 host tensor, got " + bf16.describe());
  Tensor out = Tensor::zeros(bf16.shape(), DType::f32);
  const auto* in = static_cast<const std::uint16_t*>(bf16.raw());
  float* o = out.f32();
  for (std::int64_t i = 0; i < bf16.numel(); ++i) o[i] = bf16_bits_to_float(in[i]);
  return out;
}

}  // namespace conveyor
