// Kernel timings at one model's shapes (see kernel_timings.hpp).
#include "kernels/cuda/bench/kernel_timings.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>

#include "kernels/cuda/adamw.hpp"
#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/bench/gpu_spin.hpp"
#include "kernels/tensor/bf16.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/grad_norm.hpp"
#include "kernels/cuda/layernorm.hpp"

namespace conveyor {
namespace {

constexpr std::size_t kFillChunk = std::size_t{16} << 20;  // bytes of random host data

// A device buffer of `count` elements of `element_bytes`, filled from a chunk of random
// host values (normal, stddev `scale`, never zero) repeated over its length.
class RandomBuffer {
 public:
  RandomBuffer(std::size_t count, bool bf16, float scale, std::uint64_t seed, int device,
               cudaStream_t stream)
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
  template <class T>
  T* as() const { return buffer_.as<T>(); }

 private:
  DeviceBuffer buffer_;
};

// Token ids (or targets) uniform in [0, vocab).
DeviceBuffer random_ids(std::size_t count, std::int64_t vocab, std::uint64_t seed, int device,
                        cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::int32_t> host(count);
  for (auto& id : host) id = dist(rng);
  DeviceBuffer buf(count * 4, device, stream, "kernel bench ids");
  CUDA_CHECK(cudaMemcpyAsync(buf.data(), host.data(), count * 4, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return buf;
}

class Stream {
 public:
  explicit Stream(int device) { CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); (void)device; }
  ~Stream() {
    (void)cudaStreamSynchronize(s_);
    (void)cudaStreamDestroy(s_);
  }
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Median of `repeats` single-launch times, each between two events, after 3 warm-ups. A
// spin on the stream before the first event lets the host queue the launch (cuBLASLt's
// descriptor set-up, several kernels) while the device is still busy, so the time is the
// device's, as in training, where the host runs ahead of the device. (Without it the
// launches of a 50 us GEMM with its bias kernels added ~20 us of idle device.)
class Timer {
 public:
  static constexpr double kSpinMicroseconds = 300;  // well above any launch's host time

  Timer(cudaStream_t stream, int repeats) : stream_(stream), repeats_(repeats) {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Timer() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  double median_ms(const std::function<void()>& launch) {
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

 private:
  cudaStream_t stream_;
  int repeats_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::vector<KernelTiming> time_gpt_kernels(const KernelBenchOptions& o) {
  const GptConfig& m = o.model;
  if (o.micro_batch_size < 1 || o.repeats < 1 || m.layers < 1)
    throw std::invalid_argument("time_gpt_kernels: micro_batch_size, repeats and layers must be >= 1");
  DeviceGuard guard(o.device);
  Stream stream(o.device);
  Timer timer(stream, o.repeats);
  const int B = static_cast<int>(o.micro_batch_size), T = static_cast<int>(m.seq_len),
            C = static_cast<int>(m.d_model), NH = static_cast<int>(m.heads),
            H = static_cast<int>(m.mlp_hidden()), V = static_cast<int>(m.vocab), N = B * T;
  const int L = static_cast<int>(m.layers);
  const double n = N, c = C, h = H, v = V, bf = 2.0, f4 = 4.0;
  const int dev = o.device;
  std::uint64_t seed = 1;
  auto bf16_buf = [&](std::size_t count, float scale = 1.0f) {
    return RandomBuffer(count, true, scale, seed++, dev, stream);
  };
  auto f32_buf = [&](std::size_t count, float scale = 1.0f) {
    return RandomBuffer(count, false, scale, seed++, dev, stream);
  };
  const std::size_t NC = std::size_t(N) * C, NH4 = std::size_t(N) * H;
  std::vector<KernelTiming> rows;
  auto add = [&](std::string name, std::string group, int per_step, double flops, double bytes,
                 const std::function<void()>& launch, std::string master = "",
                 std::string grad_dtype = "") {
    rows.push_back({std::move(name), std::move(group), per_step, timer.median_ms(launch), flops,
                    bytes, std::move(master), std::move(grad_dtype)});
  };

  {  // one block's kernels
    auto x = bf16_buf(NC), x2 = bf16_buf(NC), ln = bf16_buf(NC), res = bf16_buf(NC);
    auto mean = f32_buf(N), rstd = f32_buf(N, 0.5f);
    auto ln_w = bf16_buf(C), ln_b = bf16_buf(C, 0.1f);
    auto qkv = bf16_buf(3 * NC), atty = bf16_buf(NC), lse = f32_buf(std::size_t(B) * NH * T);
    auto pre = bf16_buf(NH4), act = bf16_buf(NH4), out = bf16_buf(NC);
    auto w_qkv = bf16_buf(std::size_t(3) * C * C, 0.02f), b_qkv = bf16_buf(3 * C, 0.02f);
    auto w_fc1 = bf16_buf(std::size_t(H) * C, 0.02f), b_fc1 = bf16_buf(H, 0.02f);
    auto w_fc2 = bf16_buf(std::size_t(C) * H, 0.02f), b_fc2 = bf16_buf(C, 0.02f);
    auto dw = f32_buf(std::size_t(H) * C, 0.01f), db = f32_buf(H, 0.01f);
    auto dw16 = bf16_buf(std::size_t(H) * C, 0.01f), db16 = bf16_buf(H, 0.01f);
    auto dx = bf16_buf(NC), dqkv = bf16_buf(3 * NC), dh = bf16_buf(NH4);
    auto dlnw = f32_buf(C), dlnb = f32_buf(C), dlnw16 = bf16_buf(C), dlnb16 = bf16_buf(C);

    add("residual + LayerNorm forward", "block", 2, 0, (4 * n * c) * bf + 2 * n * f4, [&] {
      residual_layernorm_forward(res.as<bf16>(), ln.as<bf16>(), mean.as<float>(), rstd.as<float>(),
                                 x.as<bf16>(), x2.as<bf16>(), ln_w.as<bf16>(), ln_b.as<bf16>(), N,
                                 C, stream);
    });
    add("gemm qkv forward (+bias)", "block", 1, 2 * n * c * 3 * c, 0, [&] {
      linear_forward(qkv.as<bf16>(), nullptr, ln.as<bf16>(), w_qkv.as<bf16>(), b_qkv.as<bf16>(), N,
                     C, 3 * C, stream);
    });
    // A causal softmax needs sane logits: scale q and k down (random values of stddev 1
    // over 128 dims would give scores of stddev ~1, which is fine).
    const double att = 2.0 * B * NH * double(T) * T * (double(C) / NH);  // causal fwd FLOPs
    add("attention forward (causal)", "block", 1, att, 0, [&] {
      attention_forward(atty.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, C, NH, stream);
    });
    add("gemm proj forward (+bias)", "block", 1, 2 * n * c * c, 0, [&] {
      linear_forward(out.as<bf16>(), nullptr, atty.as<bf16>(), w_qkv.as<bf16>(), b_qkv.as<bf16>(),
                     N, C, C, stream);
    });
    add("gemm fc1 forward (+bias +GELU)", "block", 1, 2 * n * c * h, 0, [&] {
      linear_forward(act.as<bf16>(), pre.as<bf16>(), ln.as<bf16>(), w_fc1.as<bf16>(),
                     b_fc1.as<bf16>(), N, C, H, stream);
    });
    add("gemm fc2 forward (+bias)", "block", 1, 2 * n * h * c, 0, [&] {
      linear_forward(out.as<bf16>(), nullptr, act.as<bf16>(), w_fc2.as<bf16>(), b_fc2.as<bf16>(),
                     N, H, C, stream);
    });
    add("gemm fc2 backward input (+dGELU)", "block", 1, 2 * n * h * c, 0, [&] {
      linear_backward_input(dh.as<bf16>(), out.as<bf16>(), w_fc2.as<bf16>(), pre.as<bf16>(), N, H,
                            C, stream);
    });
    add("gemm fc1 backward input", "block", 1, 2 * n * c * h, 0, [&] {
      linear_backward_input(dx.as<bf16>(), dh.as<bf16>(), w_fc1.as<bf16>(), nullptr, N, C, H,
                            stream);
    });
    add("gemm proj backward input", "block", 1, 2 * n * c * c, 0, [&] {
      linear_backward_input(dx.as<bf16>(), out.as<bf16>(), w_qkv.as<bf16>(), nullptr, N, C, C,
                            stream);
    });
    add("attention backward (causal)", "block", 1, 2.5 * att, 0, [&] {
      attention_backward_input(dqkv.as<bf16>(), out.as<bf16>(), qkv.as<bf16>(), atty.as<bf16>(),
                               lse.as<float>(), B, T, C, NH, stream);
    });
    add("gemm qkv backward input", "block", 1, 2 * n * 3 * c * c, 0, [&] {
      linear_backward_input(dx.as<bf16>(), dqkv.as<bf16>(), w_qkv.as<bf16>(), nullptr, N, C, 3 * C,
                            stream);
    });
    add("LayerNorm backward input (+=)", "block", 2, 0, 4 * n * c * bf + 2 * n * f4, [&] {
      layernorm_backward_input(dx.as<bf16>(), out.as<bf16>(), res.as<bf16>(), ln_w.as<bf16>(),
                               mean.as<float>(), rstd.as<float>(), N, C, stream);
    });
    // The weight-gradient kernels once per gradient type (the pointers' type picks the
    // launchers' overload); `label` names it in the row, `grad` is its optim.grad_dtype.
    auto weight_rows = [&](auto* dwg, auto* dbg, auto* dlnwg, auto* dlnbg,
                           const std::string& label, const std::string& grad) {
      add("gemm fc2 backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * h * c, 0, [&] {
        linear_backward_weight(dwg, dbg, out.as<bf16>(), act.as<bf16>(), N, H, C, stream);
      }, "", grad);
      add("gemm fc1 backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * c * h, 0, [&] {
        linear_backward_weight(dwg, dbg, dh.as<bf16>(), ln.as<bf16>(), N, C, H, stream);
      }, "", grad);
      add("gemm proj backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * c * c, 0, [&] {
        linear_backward_weight(dwg, dbg, out.as<bf16>(), atty.as<bf16>(), N, C, C, stream);
      }, "", grad);
      add("gemm qkv backward weight (+= " + label + ", +bias)", "block", 1, 2 * n * c * 3 * c, 0,
          [&] {
            linear_backward_weight(dwg, dbg, dqkv.as<bf16>(), ln.as<bf16>(), N, C, 3 * C, stream);
          },
          "", grad);
      const double ln_bytes = 2 * n * c * bf + 2 * n * f4;
      add("LayerNorm backward weight (+= " + label + ")", "block", 2, 0, ln_bytes,
          [&] {
            layernorm_backward_weight(dlnwg, dlnbg, out.as<bf16>(), res.as<bf16>(),
                                      mean.as<float>(), rstd.as<float>(), N, C, stream);
          },
          "", grad);
    };
    weight_rows(dw.as<float>(), db.as<float>(), dlnw.as<float>(), dlnb.as<float>(), "fp32", "f32");
    weight_rows(dw16.as<bf16>(), db16.as<bf16>(), dlnw16.as<bf16>(), dlnb16.as<bf16>(), "bf16",
                "bf16");
  }
  for (auto& r : rows) r.per_step *= L;

  {  // embedding, head and loss
    auto tokens = random_ids(N, V, seed++, dev, stream), targets = random_ids(N, V, seed++, dev, stream);
    auto wte = bf16_buf(std::size_t(V) * C, 0.02f), wpe = bf16_buf(std::size_t(T) * C, 0.02f);
    auto dwte = f32_buf(std::size_t(V) * C, 0.01f), dwpe = f32_buf(std::size_t(T) * C, 0.01f);
    auto dwte16 = bf16_buf(std::size_t(V) * C, 0.01f);
    auto dwpe16 = bf16_buf(std::size_t(T) * C, 0.01f);
    auto x = bf16_buf(NC), dx = bf16_buf(NC), logits = bf16_buf(std::size_t(N) * V);
    auto losses = f32_buf(N);
    add("embedding forward", "head", 1, 0, 2 * n * c * bf + n * 4, [&] {
      embedding_forward(x.as<bf16>(), tokens.as<std::int32_t>(), wte.as<bf16>(), wpe.as<bf16>(), B,
                        T, C, stream);
    });
    add("embedding backward weight (+= fp32)", "head", 1, 0, n * c * (bf + 2 * f4) + n * 4, [&] {
      embedding_backward_weight(dwte.as<float>(), dwpe.as<float>(), x.as<bf16>(),
                                tokens.as<std::int32_t>(), B, T, C, V, stream);
    }, "", "f32");
    add("embedding backward weight (+= bf16)", "head", 1, 0, n * c * (bf + 2 * bf) + n * 4, [&] {
      embedding_backward_weight(dwte16.as<bf16>(), dwpe16.as<bf16>(), x.as<bf16>(),
                                tokens.as<std::int32_t>(), B, T, C, V, stream);
    }, "", "bf16");
    add("gemm head forward", "head", 1, 2 * n * c * v, 0, [&] {
      linear_forward(logits.as<bf16>(), nullptr, x.as<bf16>(), wte.as<bf16>(), nullptr, N, C, V,
                     stream);
    });
    // Evaluation only: a training forward forms the gradient in the same launch (below).
    add("cross-entropy loss only (evaluation)", "head", 0, 0, n * v * bf, [&] {
      cross_entropy_forward_backward(losses.as<float>(), nullptr, logits.as<bf16>(),
                                     targets.as<std::int32_t>(), 0.0f, N, V, stream);
    });
    // In place, as the stage model runs it in a training forward (the logits become their
    // gradient): time it on fresh logits each launch would add a copy; the values' range
    // does not change the cost.
    add("cross-entropy loss and gradient (in place)", "head", 1, 0, 2 * n * v * bf, [&] {
      cross_entropy_forward_backward(losses.as<float>(), logits.as<bf16>(), logits.as<bf16>(),
                                     targets.as<std::int32_t>(), 1.0f / float(N), N, V, stream);
    });
    add("gemm head backward input", "head", 1, 2 * n * c * v, 0, [&] {
      linear_backward_input(dx.as<bf16>(), logits.as<bf16>(), wte.as<bf16>(), nullptr, N, C, V,
                            stream);
    });
    add("gemm head backward weight (+= fp32)", "head", 1, 2 * n * c * v, 0, [&] {
      linear_backward_weight(dwte.as<float>(), nullptr, logits.as<bf16>(), x.as<bf16>(), N, C, V,
                             stream);
    }, "", "f32");
    add("gemm head backward weight (+= bf16)", "head", 1, 2 * n * c * v, 0, [&] {
      linear_backward_weight(dwte16.as<bf16>(), nullptr, logits.as<bf16>(), x.as<bf16>(), N, C,
                             V, stream);
    }, "", "bf16");
  }

  {  // the optimizer over every parameter of the model
    const std::size_t P = std::size_t(L) * (12 * std::size_t(C) * C + 13 * std::size_t(C)) +
                          2 * std::size_t(V) * C + std::size_t(T) * C + 2 * std::size_t(C);
    const double p = double(P);
    auto grads = f32_buf(P, 1e-3f), grads16 = bf16_buf(P, 1e-3f);
    auto norm = f32_buf(1);
    add("gradient norm (sum of squares)", "optimizer", 1, 0, p * f4, [&] {
      grad_square_sum(norm.as<float>(), grads.as<float>(), std::int64_t(P), false, stream);
    }, "", "f32");
    add("gradient norm (sum of squares, bf16 grads)", "optimizer", 1, 0, p * bf, [&] {
      grad_square_sum(norm.as<float>(), grads16.as<bf16>(), std::int64_t(P), false, stream);
    }, "", "bf16");
    AdamWHyper hyper;
    hyper.lr = 1e-4f;
    adamw_bias_corrections(hyper, 10);
    const std::int64_t end = std::int64_t(P);
    const std::uint8_t decay = 1;
    // The decay flags live on the device in the optimizer; one run covering everything.
    DeviceBuffer runs_end(sizeof end, dev, stream, "decay run ends"), runs_decay(1, dev, stream, "decay flags");
    CUDA_CHECK(cudaMemcpyAsync(runs_end.data(), &end, sizeof end, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(runs_decay.data(), &decay, 1, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const DecayRuns runs{runs_end.as<std::int64_t>(), runs_decay.as<std::uint8_t>(), 1};
    {
      auto master = f32_buf(P, 0.02f), m = f32_buf(P, 1e-3f), vv = f32_buf(P, 1e-6f);
      auto compute = bf16_buf(P, 0.02f);
      add("AdamW fp32 master (+bf16 copy)", "optimizer", 1, 0, p * (16 + 14), [&] {
        adamw_update(master.as<float>(), compute.as<bf16>(), grads.as<float>(), m.as<float>(),
                     vv.as<float>(), std::int64_t(P), hyper, runs, stream);
      }, "fp32", "f32");
      add("AdamW fp32 master (+bf16 copy, bf16 grads)", "optimizer", 1, 0, p * (14 + 14), [&] {
        adamw_update(master.as<float>(), compute.as<bf16>(), grads16.as<bf16>(), m.as<float>(),
                     vv.as<float>(), std::int64_t(P), hyper, runs, stream);
      }, "fp32", "bf16");
    }
    {
      auto params = bf16_buf(P, 0.02f), m = bf16_buf(P, 1e-3f), vv = bf16_buf(P, 1e-3f);
      add("AdamW all-bf16 (fp32 grads)", "optimizer", 1, 0, p * (10 + 6), [&] {
        adamw_update_bf16(params.as<bf16>(), grads.as<float>(), m.as<bf16>(), vv.as<bf16>(),
                          std::int64_t(P), hyper, runs, stream);
      }, "bf16", "f32");
      add("AdamW all-bf16 (bf16 grads)", "optimizer", 1, 0, p * (8 + 6), [&] {
        adamw_update_bf16(params.as<bf16>(), grads16.as<bf16>(), m.as<bf16>(), vv.as<bf16>(),
                          std::int64_t(P), hyper, runs, stream);
      }, "bf16", "bf16");
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return rows;
}

}  // namespace conveyor
