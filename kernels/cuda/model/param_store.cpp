#include "kernels/cuda/model/param_store.hpp"

#include <stdexcept>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/bf16.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/grad_norm.hpp"

namespace conveyor {
namespace {

constexpr std::int64_t kAlignElements = 128;  // 256 bytes of bf16, 512 of f32

std::int64_t round_up(std::int64_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

DeviceBuffer zeroed(std::size_t bytes, int device, cudaStream_t stream, const char* label) {
  DeviceBuffer b(bytes, device, stream, label);
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(b.data(), 0, bytes, stream));
  return b;
}

}  // namespace

ParamStore::ParamStore(const std::vector<Param>& initial, bool master_fp32, int device,
                       cudaStream_t stream)
    : master_fp32_(master_fp32), device_(device), stream_(stream) {
  for (const Param& p : initial) {
    if (!p.value.defined() || p.value.dtype() != DType::f32 || !p.value.device().is_cpu())
      throw std::invalid_argument("ParamStore: parameter " + p.name + " must be f32 on cpu, got " +
                                  p.value.describe());
    Meta m;
    m.name = p.name;
    m.shape = p.value.shape();
    m.offset = total_;
    m.numel = p.value.numel();
    m.decay = p.decay;
    total_ += round_up(m.numel);
    meta_.push_back(std::move(m));
  }
  const auto n = static_cast<std::size_t>(total_);

  // Host images of the flat buffers, padding zero.
  std::vector<float> host_f32(master_fp32_ ? n : 0, 0.0f);
  std::vector<std::uint16_t> host_bf16(n, 0);
  for (std::size_t i = 0; i < meta_.size(); ++i) {
    const float* src = initial[i].value.f32();
    const auto off = static_cast<std::size_t>(meta_[i].offset);
    for (std::int64_t k = 0; k < meta_[i].numel; ++k) {
      if (master_fp32_) host_f32[off + static_cast<std::size_t>(k)] = src[k];
      host_bf16[off + static_cast<std::size_t>(k)] = float_to_bf16_bits(src[k]);
    }
  }

  // Decay runs: run i ends where parameter i + 1 starts (its padding shares its flag).
  std::vector<std::int64_t> ends(meta_.size());
  std::vector<std::uint8_t> flags(meta_.size());
  for (std::size_t i = 0; i < meta_.size(); ++i) {
    ends[i] = i + 1 < meta_.size() ? meta_[i + 1].offset : total_;
    flags[i] = meta_[i].decay ? 1 : 0;
  }

  const std::size_t moment_bytes = n * (master_fp32_ ? sizeof(float) : sizeof(bf16));
  if (master_fp32_) master_ = DeviceBuffer(n * sizeof(float), device, stream, "fp32 master weights");
  values_ = DeviceBuffer(n * sizeof(bf16), device, stream, "bf16 weights");
  grads_ = zeroed(n * sizeof(float), device, stream, "f32 weight gradients");
  m_ = zeroed(moment_bytes, device, stream, "AdamW first moments");
  v_ = zeroed(moment_bytes, device, stream, "AdamW second moments");
  decay_ends_ = DeviceBuffer(ends.size() * sizeof(std::int64_t), device, stream, "AdamW decay runs");
  decay_flags_ = DeviceBuffer(flags.size(), device, stream, "AdamW decay flags");
  squares_ = DeviceBuffer(meta_.size() * sizeof(float), device, stream, "gradient squares");

  if (master_fp32_)
    CUDA_CHECK(cudaMemcpyAsync(master_.data(), host_f32.data(), n * sizeof(float),
                               cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(values_.data(), host_bf16.data(), n * sizeof(bf16),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(decay_ends_.data(), ends.data(), ends.size() * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(decay_flags_.data(), flags.data(), flags.size(),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));  // the host images go out of scope
}

std::vector<double> ParamStore::grad_squares() const {
  float* out = squares_.as<float>();
  for (std::size_t i = 0; i < meta_.size(); ++i)
    grad_square_sum(out + i, grad(i), meta_[i].numel, /*accumulate=*/false, stream_);
  std::vector<float> host(meta_.size());
  CUDA_CHECK(cudaMemcpyAsync(host.data(), out, host.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return std::vector<double>(host.begin(), host.end());
}

void ParamStore::step(const AdamWConfig& config, double lr, float grad_scale) {
  AdamWHyper hp;
  hp.lr = static_cast<float>(lr);
  hp.beta1 = config.beta1;
  hp.beta2 = config.beta2;
  hp.eps = config.eps;
  hp.weight_decay = config.weight_decay;
  hp.grad_scale = grad_scale;
  adamw_bias_corrections(hp, ++steps_);
  const DecayRuns runs{decay_ends_.as<std::int64_t>(), decay_flags_.as<std::uint8_t>(),
                       static_cast<int>(meta_.size())};
  if (master_fp32_)
    adamw_update(master_.as<float>(), values_.as<bf16>(), grads_.as<float>(), m_.as<float>(),
                 v_.as<float>(), total_, hp, runs, stream_);
  else
    adamw_update_bf16(values_.as<bf16>(), grads_.as<float>(), m_.as<bf16>(), v_.as<bf16>(),
                      total_, hp, runs, stream_);
  CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
}

void ParamStore::discard_grads() {
  CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
}

std::vector<NamedTensor> ParamStore::weights() const {
  if (master_fp32_) return download_f32(master_);
  const auto n = static_cast<std::size_t>(total_);
  std::vector<std::uint16_t> bits(n);
  CUDA_CHECK(cudaMemcpyAsync(bits.data(), values_.data(), n * sizeof(bf16), cudaMemcpyDeviceToHost,
                             stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<NamedTensor> out;
  out.reserve(meta_.size());
  for (const Meta& m : meta_) {
    Tensor t = Tensor::zeros(m.shape);
    float* dst = t.f32();
    for (std::int64_t k = 0; k < m.numel; ++k)
      dst[k] = bf16_bits_to_float(bits[static_cast<std::size_t>(m.offset + k)]);
    out.push_back(NamedTensor{m.name, std::move(t)});
  }
  return out;
}

std::vector<NamedTensor> ParamStore::gradients() const { return download_f32(grads_); }

std::vector<NamedTensor> ParamStore::download_f32(const DeviceBuffer& flat) const {
  std::vector<NamedTensor> out;
  out.reserve(meta_.size());
  for (const Meta& m : meta_) {
    Tensor t = Tensor::zeros(m.shape);
    CUDA_CHECK(cudaMemcpyAsync(t.raw(), flat.as<float>() + m.offset,
                               static_cast<std::size_t>(m.numel) * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_));
    out.push_back(NamedTensor{m.name, std::move(t)});
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return out;
}

std::size_t ParamStore::bytes() const {
  return master_.bytes() + values_.bytes() + grads_.bytes() + m_.bytes() + v_.bytes();
}

}  // namespace conveyor
