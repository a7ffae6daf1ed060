// Kernel timings at one model's shapes (see kernel_timings.hpp): the architecture's block
// kernels (gpt2_block_kernels.cpp, llama_block_kernels.cpp), then the embedding, head and
// loss, and the optimizer, which both share.
#include "kernels/cuda/bench/kernel_timings.hpp"

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/bench/kernel_rows.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/grad_norm.hpp"
#include "kernels/model/param_layout.hpp"

namespace conveyor {

using kernel_bench::KernelRows;

std::vector<KernelTiming> time_model_kernels(const KernelBenchOptions& o) {
  const GptConfig& m = o.model;
  if (o.micro_batch_size < 1 || o.repeats < 1 || m.layers < 1)
    throw std::invalid_argument("time_model_kernels: micro_batch_size, repeats and layers must be >= 1");
  DeviceGuard guard(o.device);
  KernelRows k(o.device, o.repeats);
  const cudaStream_t stream = k.stream();
  const int B = static_cast<int>(o.micro_batch_size), T = static_cast<int>(m.seq_len),
            C = static_cast<int>(m.d_model), V = static_cast<int>(m.vocab), N = B * T;
  const int L = static_cast<int>(m.layers);
  const bool llama = m.arch == ModelArch::llama;
  const double n = N, c = C, v = V, bf = 2.0, f4 = 4.0;
  const std::size_t NC = std::size_t(N) * C;

  if (llama)
    kernel_bench::add_llama_block_kernels(k, m, B);
  else
    kernel_bench::add_gpt2_block_kernels(k, m, B);
  for (auto& r : k.rows()) r.per_step *= L;
  kernel_bench::add_fp8_linear_kernels(k, m, B);

  {  // embedding, head and loss
    auto tokens = k.ids(N, V), targets = k.ids(N, V);
    auto wte = k.bf16(std::size_t(V) * C, 0.02f), wpe = k.bf16(std::size_t(T) * C, 0.02f);
    auto dwte = k.f32(std::size_t(V) * C, 0.01f), dwpe = k.f32(std::size_t(T) * C, 0.01f);
    auto dwte16 = k.bf16(std::size_t(V) * C, 0.01f);
    auto dwpe16 = k.bf16(std::size_t(T) * C, 0.01f);
    auto x = k.bf16(NC), dx = k.bf16(NC), logits = k.bf16(std::size_t(N) * V);
    auto losses = k.f32(N);
    // Llama has no position embedding (null wpe and dwpe).
    const double positions = llama ? 0.0 : 1.0;
    k.add("embedding forward", "head", 1, 0, (1 + positions) * n * c * bf + n * 4, [&] {
      embedding_forward(x.as<bf16>(), tokens.as<std::int32_t>(), wte.as<bf16>(),
                        llama ? nullptr : wpe.as<bf16>(), B, T, C, stream);
    });
    k.add("embedding backward weight (+= fp32)", "head", 1, 0,
        n * c * (bf + (1 + positions) * f4) + n * 4, [&] {
      embedding_backward_weight(dwte.as<float>(), llama ? nullptr : dwpe.as<float>(), x.as<bf16>(),
                                tokens.as<std::int32_t>(), B, T, C, V, stream);
    }, "", "f32");
    k.add("embedding backward weight (+= bf16)", "head", 1, 0,
        n * c * (bf + (1 + positions) * bf) + n * 4, [&] {
      embedding_backward_weight(dwte16.as<bf16>(), llama ? nullptr : dwpe16.as<bf16>(),
                                x.as<bf16>(), tokens.as<std::int32_t>(), B, T, C, V, stream);
    }, "", "bf16");
    k.add("gemm head forward", "head", 1, 2 * n * c * v, 0, [&] {
      linear_forward(logits.as<bf16>(), nullptr, x.as<bf16>(), wte.as<bf16>(), nullptr, N, C, V,
                     stream);
    });
    // Evaluation only: a training forward forms the gradient in the same launch (below).
    k.add("cross-entropy loss only (evaluation)", "head", 0, 0, n * v * bf, [&] {
      cross_entropy_forward_backward(losses.as<float>(), nullptr, logits.as<bf16>(),
                                     targets.as<std::int32_t>(), 0.0f, N, V, stream);
    });
    // In place, as the stage model runs it in a training forward (the logits become their
    // gradient): time it on fresh logits each launch would add a copy; the values' range
    // does not change the cost.
    k.add("cross-entropy loss and gradient (in place)", "head", 1, 0, 2 * n * v * bf, [&] {
      cross_entropy_forward_backward(losses.as<float>(), logits.as<bf16>(), logits.as<bf16>(),
                                     targets.as<std::int32_t>(), 1.0f / float(N), N, V, stream);
    });
    k.add("gemm head backward input", "head", 1, 2 * n * c * v, 0, [&] {
      linear_backward_input(dx.as<bf16>(), logits.as<bf16>(), wte.as<bf16>(), nullptr, N, C, V,
                            stream);
    });
    k.add("gemm head backward weight (+= fp32)", "head", 1, 2 * n * c * v, 0, [&] {
      linear_backward_weight(dwte.as<float>(), nullptr, logits.as<bf16>(), x.as<bf16>(), N, C, V,
                             stream);
    }, "", "f32");
    k.add("gemm head backward weight (+= bf16)", "head", 1, 2 * n * c * v, 0, [&] {
      linear_backward_weight(dwte16.as<bf16>(), nullptr, logits.as<bf16>(), x.as<bf16>(), N, C,
                             V, stream);
    }, "", "bf16");
  }

  {  // the optimizer over every parameter of the model
    // Every parameter of the model (the whole-model slice's layout; a tied head counted
    // twice, as the embedding and head stages each keep a copy).
    std::size_t P = 0;
    for (const ParamLayout& p : stage_param_layout(m, StageSlice{0, L, true, true}))
      P += static_cast<std::size_t>(p.shape.numel());
    const double p = double(P);
    auto grads = k.f32(P, 1e-3f), grads16 = k.bf16(P, 1e-3f);
    auto norm = k.f32(1);
    k.add("gradient norm (sum of squares)", "optimizer", 1, 0, p * f4, [&] {
      grad_square_sum(norm.as<float>(), grads.as<float>(), std::int64_t(P), false, stream);
    }, "", "f32");
    k.add("gradient norm (sum of squares, bf16 grads)", "optimizer", 1, 0, p * bf, [&] {
      grad_square_sum(norm.as<float>(), grads16.as<bf16>(), std::int64_t(P), false, stream);
    }, "", "bf16");
    AdamWHyper hyper;
    hyper.lr = 1e-4f;
    adamw_bias_corrections(hyper, 10);
    const std::int64_t end = std::int64_t(P);
    const std::uint8_t decay = 1;
    // The decay flags live on the device in the optimizer; one run covering everything.
    DeviceBuffer runs_end(sizeof end, o.device, stream, "decay run ends"),
        runs_decay(1, o.device, stream, "decay flags");
    CUDA_CHECK(cudaMemcpyAsync(runs_end.data(), &end, sizeof end, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(runs_decay.data(), &decay, 1, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const DecayRuns runs{runs_end.as<std::int64_t>(), runs_decay.as<std::uint8_t>(), 1};
    {
      auto master = k.f32(P, 0.02f), m = k.f32(P, 1e-3f), vv = k.f32(P, 1e-6f);
      auto compute = k.bf16(P, 0.02f);
      k.add("AdamW fp32 master (+bf16 copy)", "optimizer", 1, 0, p * (16 + 14), [&] {
        adamw_update(master.as<float>(), compute.as<bf16>(), grads.as<float>(), m.as<float>(),
                     vv.as<float>(), std::int64_t(P), hyper, runs, stream);
      }, "fp32", "f32");
      k.add("AdamW fp32 master (+bf16 copy, bf16 grads)", "optimizer", 1, 0, p * (14 + 14), [&] {
        adamw_update(master.as<float>(), compute.as<bf16>(), grads16.as<bf16>(), m.as<float>(),
                     vv.as<float>(), std::int64_t(P), hyper, runs, stream);
      }, "fp32", "bf16");
    }
    {
      auto params = k.bf16(P, 0.02f), m = k.bf16(P, 1e-3f), vv = k.bf16(P, 1e-3f);
      k.add("AdamW all-bf16 (fp32 grads)", "optimizer", 1, 0, p * (10 + 6), [&] {
        adamw_update_bf16(params.as<bf16>(), grads.as<float>(), m.as<bf16>(), vv.as<bf16>(),
                          std::int64_t(P), hyper, runs, stream);
      }, "bf16", "f32");
      k.add("AdamW all-bf16 (bf16 grads)", "optimizer", 1, 0, p * (8 + 6), [&] {
        adamw_update_bf16(params.as<bf16>(), grads16.as<bf16>(), m.as<bf16>(), vv.as<bf16>(),
                          std::int64_t(P), hyper, runs, stream);
      }, "bf16", "bf16");
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return k.take();
}

}  // namespace conveyor
