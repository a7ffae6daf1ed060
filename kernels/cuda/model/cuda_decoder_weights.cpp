#include "kernels/cuda/model/cuda_decoder_weights.hpp"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/copy.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/model/layer_params.hpp"
#include "kernels/model/llama_layers.hpp"

namespace conveyor {
namespace {

void require_multiple_of_8(const char* what, std::int64_t v) {
  if (v % 8 != 0)
    throw std::invalid_argument(fmt::format(
        "CudaKvDecoder: {} {} must be a multiple of 8 (tensor-core GEMMs)", what, v));
}

}  // namespace

CudaDecoderWeights::CudaDecoderWeights(const GptConfig& c, const std::vector<Param>& params,
                                       int device, cudaStream_t stream) {
  const std::int64_t C = c.d_model, V = c.vocab, hs = c.head_dim();
  const std::int64_t NKV = c.arch == ModelArch::gpt2 ? c.heads : c.kv_head_count();
  const std::int64_t W = C + 2 * NKV * hs;
  if (hs > 256)  // decode_attention.hpp's limit
    throw std::invalid_argument(fmt::format("CudaKvDecoder: head_dim {} is more than the decode attention's 256", hs));
  require_multiple_of_8("d_model", C);
  require_multiple_of_8("the qkv width (heads + 2 kv_heads) * head_dim", W);
  require_multiple_of_8("the MLP width", c.arch == ModelArch::gpt2 ? c.mlp_hidden() : c.llama_ffn_dim());

  // 1. Find and check every parameter (nothing on the device yet).
  std::map<std::string, const Param*> by_name;
  for (const Param& p : params) by_name[p.name] = &p;
  std::vector<std::pair<Tensor*, const Tensor*>> uploads;  // (device slot, host f32 value)
  const auto find = [&](const std::string& name, Shape shape) -> const Tensor& {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw std::invalid_argument("CudaKvDecoder: no parameter " + name);
    const Tensor& t = it->second->value;
    if (t.dtype() != DType::f32 || t.shape() != shape || !t.device().is_cpu())
      throw std::invalid_argument(fmt::format("CudaKvDecoder: {} is {}, the model needs host f32 {}", name,
                                              t.describe(), shape.str()));
    return t;
  };
  const auto take = [&](Tensor& slot, const std::string& name, Shape shape) {
    uploads.emplace_back(&slot, &find(name, shape));
  };
  take(wte, "wte.weight", {V, C});
  const Tensor& lm_head_host = find("lm_head.weight", {V, C});  // padded below
  blocks.resize(static_cast<std::size_t>(c.layers));
  for (int b = 0; b < c.layers; ++b) {
    Block& w = blocks[static_cast<std::size_t>(b)];
    const auto name = [b](const char* rest) { return block_param_name(b, rest); };
    if (c.arch == ModelArch::gpt2) {
      const std::int64_t H = c.mlp_hidden();
      take(w.norm1_w, name("ln1.weight"), {C});
      take(w.norm1_b, name("ln1.bias"), {C});
      take(w.qkv_w, name("attn.qkv.weight"), {W, C});
      take(w.qkv_b, name("attn.qkv.bias"), {W});
      take(w.proj_w, name("attn.proj.weight"), {C, C});
      take(w.proj_b, name("attn.proj.bias"), {C});
      take(w.norm2_w, name("ln2.weight"), {C});
      take(w.norm2_b, name("ln2.bias"), {C});
      take(w.up_w, name("mlp.fc1.weight"), {H, C});
      take(w.up_b, name("mlp.fc1.bias"), {H});
      take(w.down_w, name("mlp.fc2.weight"), {C, H});
      take(w.down_b, name("mlp.fc2.bias"), {C});
    } else {
      const std::int64_t F = c.llama_ffn_dim();
      take(w.norm1_w, name("attn_norm.weight"), {C});
      take(w.qkv_w, name("attn.qkv.weight"), {W, C});
      take(w.proj_w, name("attn.o.weight"), {C, C});
      take(w.norm2_w, name("mlp_norm.weight"), {C});
      take(w.up_w, name("mlp.gate_up.weight"), {2 * F, C});
      take(w.down_w, name("mlp.down.weight"), {C, F});
    }
  }
  if (c.arch == ModelArch::gpt2) {
    take(wpe, "wpe.weight", {c.seq_len, C});
    take(norm_f_w, "ln_f.weight", {C});
    take(norm_f_b, "ln_f.bias", {C});
  } else {
    take(norm_f_w, "norm_f.weight", {C});
  }

  // 2. Upload, each rounded to bf16 on the host (copies from pageable memory: the host
  // temporaries may go as soon as a copy is queued, copy.hpp).
  DeviceGuard guard(device);
  for (auto& [slot, host] : uploads) *slot = to_device(to_bf16_host(*host), device, stream);
  padded_vocab = (V + 7) / 8 * 8;
  Tensor head = Tensor::zeros({padded_vocab, C}, DType::bf16);
  const Tensor head_bf16 = to_bf16_host(lm_head_host);
  std::memcpy(head.raw(), head_bf16.raw(), head_bf16.bytes());
  lm_head = to_device(head, device, stream);
  if (c.arch == ModelArch::llama) {
    const llama::Context tables(c);  // training's: (seq_len, hs/2) f32, from double
    rope_cos = to_device(tables.cos, device, stream);
    rope_sin = to_device(tables.sin, device, stream);
  }
}

std::size_t CudaDecoderWeights::bytes() const {
  const auto held = [](const Tensor& t) { return t.defined() ? t.bytes() : std::size_t{0}; };
  std::size_t total = 0;
  for (const Tensor* t : {&wte, &wpe, &norm_f_w, &norm_f_b, &lm_head, &rope_cos, &rope_sin}) total += held(*t);
  for (const Block& b : blocks)
    for (const Tensor* t : {&b.norm1_w, &b.norm1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.norm2_w,
                            &b.norm2_b, &b.up_w, &b.up_b, &b.down_w, &b.down_b})
      total += held(*t);
  return total;
}

}  // namespace conveyor
