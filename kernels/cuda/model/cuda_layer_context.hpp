#pragma once
// What the layers of a CUDA stage share (gpt2_cuda_layers.hpp, llama_cuda_layers.hpp, and
// the skeleton that composes them, cuda_stage_model.cpp): the model, the slice, the device
// and its compute stream, the parameter store, and where each part's parameters begin in
// it (stage_parts.hpp's walk over the CPU layers' layouts: the same positions as GptStage's
// params(), by construction).
// The blocks' linear layers go through linear() (stage_linears.hpp), which runs them in the
// run's precision.matmul.
// What must hold: every tensor a layer allocates comes from alloc()/zeros() on the compute
// stream, so the caching allocator orders its reuse after the launches that read it; a
// layer never synchronises.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "kernels/cuda/device_storage.hpp"
#include "kernels/cuda/model/param_store.hpp"
#include "kernels/cuda/model/stage_linears.hpp"
#include "kernels/cuda/types.hpp"
#include "kernels/model/gpt_config.hpp"
#include "kernels/model/stage_parts.hpp"
#include "kernels/model/stage_slice.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

inline bf16* bf(Tensor& t) { return static_cast<bf16*>(t.raw()); }
inline const bf16* bf(const Tensor& t) { return static_cast<const bf16*>(t.raw()); }
inline float* f32(Tensor& t) { return static_cast<float*>(t.raw()); }
inline const float* f32(const Tensor& t) { return static_cast<const float*>(t.raw()); }
inline const std::int32_t* i32(const Tensor& t) {
  return static_cast<const std::int32_t*>(t.raw());
}

/// One layer's parameters in the store: the k-th of its layout is store[first + k].
class CudaLayerParams {
 public:
  CudaLayerParams(const ParamStore& store, std::size_t first) : store_(&store), first_(first) {}
  const bf16* w(std::size_t k) const { return store_->value(first_ + k); }
  /// Its index in the store (how StageLinears names a weight).
  std::size_t index(std::size_t k) const { return first_ + k; }
  /// The gradient as G (float or bf16: the store's gradient type).
  template <class G>
  G* g(std::size_t k) const {
    return store_->grad<G>(first_ + k);
  }

 private:
  const ParamStore* store_;
  std::size_t first_;
};

struct CudaLayerContext {
  GptConfig config;
  StageSlice slice;
  int device = 0;
  cudaStream_t stream = nullptr;
  const ParamStore* params = nullptr;  // the stage's; outlives its layers
  StagePartFirsts firsts;
  const StageLinears* linears = nullptr;  // the blocks' GEMMs (precision.matmul); the stage's

  const StageLinears& linear() const { return *linears; }

  Tensor alloc(Shape shape, DType dtype, const char* what) const {
    return empty_cuda(std::move(shape), dtype, device, stream, what);
  }
  Tensor zeros(Shape shape, DType dtype, const char* what) const {
    return zeros_cuda(std::move(shape), dtype, device, stream, what);
  }
  // Whether the slice holds local block j's attention / MLP half.
  bool has_attention(int j) const { return slice.holds_attention(slice.first_block + j); }
  bool has_mlp(int j) const { return slice.holds_mlp(slice.first_block + j); }
  CudaLayerParams embedding() const { return {*params, firsts.embedding}; }
  CudaLayerParams attention(int j) const {
    return {*params, firsts.attention[static_cast<std::size_t>(j)]};
  }
  CudaLayerParams mlp(int j) const { return {*params, firsts.mlp[static_cast<std::size_t>(j)]}; }
  CudaLayerParams head() const { return {*params, firsts.head}; }
};

/// What the final norm, the LM head and the loss keep (device). The norm's statistics are
/// its architecture's: LayerNorm's mean and rstd, RMSNorm's rstd alone (lnf_mean empty).
struct CudaHeadActs {
  Tensor targets;                  // (B, T) i32
  Tensor x;                        // (B, T, C) bf16 input of the final norm
  Tensor lnf, lnf_mean, lnf_rstd;  // (B, T, C) bf16, (B, T) f32, (B, T) f32
  Tensor logits;                   // (B, T, V) bf16: logits, then dlogits
  // The loss scale dlogits were formed with in forward (CudaStageOptions::head_loss_scale),
  // or unset: the logits are still logits and backward_input forms dlogits.
  std::optional<float> dlogits_scale;
  Tensor d_lnf;  // (B, T, C) bf16
};

}  // namespace conveyor

// The explicit instantiations of a layers class's weight-gradient members for gradient type
// G (float or bf16: optim.grad_dtype), in its .cpp.
#define CONVEYOR_CUDA_LAYERS_GRADIENTS(Layers, G)                                             \
  template void Layers::embedding_backward_weight<G>(const Tensor&, const Tensor&,            \
                                                     std::int64_t, std::int64_t, cudaStream_t) \
      const;                                                                                  \
  template void Layers::mlp_half_backward_weight<G>(int, const Layers::BlockActs&,            \
                                                    std::int64_t, std::int64_t, cudaStream_t) \
      const;                                                                                  \
  template void Layers::attention_half_backward_weight<G>(int, const Layers::BlockActs&,      \
                                                          std::int64_t, std::int64_t,         \
                                                          cudaStream_t) const;                \
  template void Layers::final_norm_backward_weight<G>(const CudaHeadActs&, std::int64_t,      \
                                                      std::int64_t, cudaStream_t) const;
