// The GPU decoder's forward: gpt2_cuda_layers.cpp's and llama_cuda_layers.cpp's forward on
// n rows of one sequence (B = 1, T = n), attention swapped for the cached one
// (decode_attention.hpp), and the LM head written in fp32. Each residual add is fused into
// the norm that follows it, as in training: a block's input x is (res2 + mlp out) of the
// block before, formed by its first norm's kernel.
#include "kernels/cuda/model/cuda_kv_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/decode_attention.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/lt_matmul.hpp"
#include "kernels/cuda/model/cuda_decoder_weights.hpp"
#include "kernels/cuda/owned_stream.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rotary.hpp"
#include "kernels/cuda/swiglu.hpp"

namespace conveyor {
namespace {

bf16* bf_of(Tensor& t) { return static_cast<bf16*>(t.raw()); }
const bf16* bf_of(const Tensor& t) { return static_cast<const bf16*>(t.raw()); }
const bf16* bf_or_null(const Tensor& t) { return t.defined() ? bf_of(t) : nullptr; }
float* f32_of(Tensor& t) { return static_cast<float*>(t.raw()); }
const float* f32_of(const Tensor& t) { return static_cast<const float*>(t.raw()); }

}  // namespace

struct CudaKvDecoder::Impl {
  GptConfig c;
  int device;
  OwnedStream stream;  // declared before every device tensor: destroyed (synchronised) last
  CudaDecoderWeights w;
  std::int64_t capacity = 0;
  std::int64_t length = 0;
  DeviceBuffer keys, values;  // bf16 (layers, capacity, NKV hs)
  DeviceBuffer tokens;        // i32 (capacity)

  Impl(const GptConfig& config, const std::vector<Param>& params, int device_index, std::int64_t max_positions)
      : c(config),
        device(device_index),
        stream(device_index),
        w(config, params, device_index, stream.get()),
        capacity(max_positions > 0 ? std::min(max_positions, config.seq_len) : config.seq_len) {
    DeviceGuard guard(device);
    const std::size_t cache = sizeof(bf16) * static_cast<std::size_t>(c.layers * capacity * kv_width());
    keys = DeviceBuffer(cache, device, stream.get(), "KV cache keys (layers, capacity, NKV hs)");
    values = DeviceBuffer(cache, device, stream.get(), "KV cache values (layers, capacity, NKV hs)");
    tokens = DeviceBuffer(sizeof(std::int32_t) * static_cast<std::size_t>(capacity), device, stream.get(),
                          "decoder tokens (capacity)");
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));  // the uploads are done: report failures here
  }

  std::int64_t kv_heads() const { return c.arch == ModelArch::gpt2 ? c.heads : c.kv_head_count(); }
  std::int64_t kv_width() const { return kv_heads() * c.head_dim(); }
  std::int64_t qkv_width() const { return c.d_model + 2 * kv_width(); }
  bf16* key_rows(std::size_t block) const {
    return keys.as<bf16>() + static_cast<std::int64_t>(block) * capacity * kv_width();
  }
  bf16* value_rows(std::size_t block) const {
    return values.as<bf16>() + static_cast<std::int64_t>(block) * capacity * kv_width();
  }

  Tensor alloc(Shape shape, DType dtype, const char* what) const {
    return empty_cuda(std::move(shape), dtype, device, stream.get(), what);
  }

  // out = norm(a + b) of `rows` rows, the sum kept in `sum` (bf16, as training's residual
  // stream); with b empty, out = norm(a) and `sum` is not written.
  void norm(Tensor& out, Tensor& sum, const bf16* a, const bf16* b, const Tensor& weight, const Tensor& bias,
            std::int64_t rows) const {
    const int n = static_cast<int>(rows), C = static_cast<int>(c.d_model);
    Tensor rstd = alloc({rows}, DType::f32, "decoder norm rstd (n)");
    if (c.arch == ModelArch::gpt2) {
      Tensor mean = alloc({rows}, DType::f32, "decoder norm mean (n)");
      if (b)
        residual_layernorm_forward(bf_of(sum), bf_of(out), f32_of(mean), f32_of(rstd), a, b, bf_of(weight),
                                   bf_of(bias), n, C, stream.get());
      else
        layernorm_forward(bf_of(out), f32_of(mean), f32_of(rstd), a, bf_of(weight), bf_of(bias), n, C, stream.get());
    } else {
      const float eps = static_cast<float>(c.norm_eps);
      if (b)
        residual_rmsnorm_forward(bf_of(sum), bf_of(out), f32_of(rstd), a, b, bf_of(weight), eps, n, C, stream.get());
      else
        rmsnorm_forward(bf_of(out), f32_of(rstd), a, bf_of(weight), eps, n, C, stream.get());
    }
  }

  // Block b's attention half on rows at positions [pos, pos + n): xn (n, C) is its norm's
  // output; writes the cache rows and returns attn.proj/attn.o's output (n, C).
  Tensor attention(std::size_t b, const Tensor& xn, std::int64_t pos, std::int64_t n) {
    const CudaDecoderWeights::Block& bw = w.blocks[b];
    const std::int64_t C = c.d_model, NH = c.heads, NKV = kv_heads(), hs = c.head_dim(), kv = kv_width(),
                       W = qkv_width();
    const int rows = static_cast<int>(n), cc = static_cast<int>(C);
    Tensor qkv = alloc({n, W}, DType::bf16, "decoder qkv (n, C + 2 NKV hs)");  // rows [q | k | v]
    linear_forward(bf_of(qkv), nullptr, bf_of(xn), bf_of(bw.qkv_w), bf_or_null(bw.qkv_b), rows, cc, int(W),
                   stream.get());
    if (c.arch == ModelArch::llama) {  // q and k side by side: one pass, tables' rows from pos on
      const std::int64_t half = hs / 2;
      rotary_forward(bf_of(qkv), f32_of(w.rope_cos) + pos * half, f32_of(w.rope_sin) + pos * half, 1, rows,
                     int(NH + NKV), int(hs), W, stream.get());
    }
    const std::size_t row_bytes = sizeof(bf16) * static_cast<std::size_t>(kv);
    const std::size_t qkv_pitch = sizeof(bf16) * static_cast<std::size_t>(W);
    CUDA_CHECK(cudaMemcpy2DAsync(key_rows(b) + pos * kv, row_bytes, bf_of(qkv) + C, qkv_pitch, row_bytes,
                                 static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, stream.get()));
    CUDA_CHECK(cudaMemcpy2DAsync(value_rows(b) + pos * kv, row_bytes, bf_of(qkv) + C + kv, qkv_pitch, row_bytes,
                                 static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, stream.get()));
    Tensor atty = alloc({n, C}, DType::bf16, "decoder attention output (n, C)");
    decode_attention_forward(bf_of(atty), bf_of(qkv), W, key_rows(b), value_rows(b), int(pos), rows, cc, int(NH),
                             int(NKV), stream.get());
    Tensor out = alloc({n, C}, DType::bf16, "decoder attention projection (n, C)");
    linear_forward(bf_of(out), nullptr, bf_of(atty), bf_of(bw.proj_w), bf_or_null(bw.proj_b), rows, cc, cc,
                   stream.get());
    return out;
  }

  // Block b's MLP on its norm's output xn2 (n, C): returns (n, C).
  Tensor mlp(std::size_t b, const Tensor& xn2, std::int64_t n) const {
    const CudaDecoderWeights::Block& bw = w.blocks[b];
    const int rows = static_cast<int>(n), cc = static_cast<int>(c.d_model);
    Tensor out = alloc({n, c.d_model}, DType::bf16, "decoder mlp output (n, C)");
    if (c.arch == ModelArch::gpt2) {
      const std::int64_t H = c.mlp_hidden();
      Tensor pre = alloc({n, H}, DType::bf16, "decoder fc1 pre-GELU (n, H)");
      Tensor h = alloc({n, H}, DType::bf16, "decoder GELU output (n, H)");
      linear_forward(bf_of(h), bf_of(pre), bf_of(xn2), bf_of(bw.up_w), bf_of(bw.up_b), rows, cc, int(H),
                     stream.get());
      linear_forward(bf_of(out), nullptr, bf_of(h), bf_of(bw.down_w), bf_of(bw.down_b), rows, int(H), cc,
                     stream.get());
    } else {
      const std::int64_t F = c.llama_ffn_dim();
      Tensor gate_up = alloc({n, 2 * F}, DType::bf16, "decoder gate_up (n, 2F)");
      linear_forward(bf_of(gate_up), nullptr, bf_of(xn2), bf_of(bw.up_w), nullptr, rows, cc, int(2 * F),
                     stream.get());
      Tensor h = alloc({n, F}, DType::bf16, "decoder SwiGLU output (n, F)");
      swiglu_forward(bf_of(h), bf_of(gate_up), n, F, stream.get());
      linear_forward(bf_of(out), nullptr, bf_of(h), bf_of(bw.down_w), nullptr, rows, int(F), cc, stream.get());
    }
    return out;
  }

  void check_tokens(std::span<const std::int32_t> ids) const {
    const std::int64_t n = static_cast<std::int64_t>(ids.size()), pos = length;
    if (n == 0) throw std::invalid_argument("CudaKvDecoder::append: no tokens");
    if (pos + n > capacity)
      throw std::invalid_argument(fmt::format(
          "CudaKvDecoder::append: positions [{}, {}) go beyond the cache's {} (the model's seq_len is {})", pos,
          pos + n, capacity, c.seq_len));
    for (std::int32_t t : ids)
      if (t < 0 || t >= c.vocab)
        throw std::invalid_argument(
            fmt::format("CudaKvDecoder::append: token {} outside the vocabulary [0, {})", t, c.vocab));
  }

  Tensor append(std::span<const std::int32_t> ids, bool last_only) {
    check_tokens(ids);
    DeviceGuard guard(device);
    const std::int64_t n = static_cast<std::int64_t>(ids.size()), pos = length, C = c.d_model, V = c.vocab,
                       Vp = w.padded_vocab;
    // From pageable memory: `ids` may go once the call returns (copy.hpp).
    CUDA_CHECK(cudaMemcpyAsync(tokens.data(), ids.data(), sizeof(std::int32_t) * ids.size(), cudaMemcpyHostToDevice,
                               stream.get()));
    Tensor x = alloc({n, C}, DType::bf16, "decoder embedding (n, C)");  // the residual stream
    embedding_forward(bf_of(x), tokens.as<std::int32_t>(), bf_of(w.wte),
                      w.wpe.defined() ? bf_of(w.wpe) + pos * C : nullptr, 1, int(n), int(C), stream.get());
    // The residual stream after each block is res2 + mlp (the pending add), formed by the
    // next norm's kernel.
    Tensor res2, mlp_out;
    for (std::size_t b = 0; b < w.blocks.size(); ++b) {
      const CudaDecoderWeights::Block& bw = w.blocks[b];
      Tensor xn = alloc({n, C}, DType::bf16, "decoder norm1 output (n, C)");
      if (b > 0) x = alloc({n, C}, DType::bf16, "decoder block input (n, C)");
      norm(xn, x, b > 0 ? bf_of(res2) : bf_of(x), b > 0 ? bf_of(mlp_out) : nullptr, bw.norm1_w, bw.norm1_b, n);
      const Tensor attn = attention(b, xn, pos, n);
      res2 = alloc({n, C}, DType::bf16, "decoder attention residual (n, C)");
      Tensor xn2 = alloc({n, C}, DType::bf16, "decoder norm2 output (n, C)");
      norm(xn2, res2, bf_of(x), bf_of(attn), bw.norm2_w, bw.norm2_b, n);
      mlp_out = mlp(b, xn2, n);
    }
    // The final norm and the head, on the rows whose logits are wanted.
    const std::int64_t first = last_only ? n - 1 : 0, rows = n - first;
    Tensor xf = alloc({rows, C}, DType::bf16, "decoder final residual (rows, C)");
    Tensor xnf = alloc({rows, C}, DType::bf16, "decoder final norm output (rows, C)");
    if (w.blocks.empty())
      norm(xnf, xf, bf_of(x) + first * C, nullptr, w.norm_f_w, w.norm_f_b, rows);
    else
      norm(xnf, xf, bf_of(res2) + first * C, bf_of(mlp_out) + first * C, w.norm_f_w, w.norm_f_b, rows);
    Tensor logits = alloc({rows, Vp}, DType::f32, "decoder logits (rows, padded V) f32");
    // Column-major, as gemm.cu's linear_forward: D (Vp, rows) = lm_head^T-op (C, Vp) * xnf (C, rows).
    lt_matmul({.m = static_cast<int>(Vp), .n = static_cast<int>(rows), .k = static_cast<int>(C), .transa = true,
               .transb = false, .A = bf_of(w.lm_head), .lda = static_cast<int>(C), .B = bf_of(xnf),
               .ldb = static_cast<int>(C), .D = f32_of(logits), .ldd = static_cast<int>(Vp),
               .d_type = CUDA_R_32F, .what = "CudaKvDecoder lm_head"},
              stream.get());
    Tensor host = Tensor::uninitialized({rows, V});
    CUDA_CHECK(cudaMemcpy2DAsync(host.f32(), sizeof(float) * static_cast<std::size_t>(V), f32_of(logits),
                                 sizeof(float) * static_cast<std::size_t>(Vp), sizeof(float) * static_cast<std::size_t>(V),
                                 static_cast<std::size_t>(rows), cudaMemcpyDeviceToHost, stream.get()));
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    length = pos + n;
    return host;
  }
};

CudaKvDecoder::CudaKvDecoder(const GptConfig& config, const std::vector<Param>& params, int device,
                             std::int64_t max_positions)
    : impl_(std::make_unique<Impl>(config, params, device, max_positions)) {}
CudaKvDecoder::~CudaKvDecoder() = default;
CudaKvDecoder::CudaKvDecoder(CudaKvDecoder&&) noexcept = default;
CudaKvDecoder& CudaKvDecoder::operator=(CudaKvDecoder&&) noexcept = default;

Tensor CudaKvDecoder::append(std::span<const std::int32_t> tokens, bool last_only) {
  return impl_->append(tokens, last_only);
}
std::int64_t CudaKvDecoder::length() const { return impl_->length; }
std::int64_t CudaKvDecoder::capacity() const { return impl_->capacity; }
void CudaKvDecoder::reset() { impl_->length = 0; }
std::size_t CudaKvDecoder::weight_bytes() const { return impl_->w.bytes(); }
std::size_t CudaKvDecoder::cache_bytes() const { return impl_->keys.bytes() + impl_->values.bytes(); }

}  // namespace conveyor
