#pragma once
// The blocks' linear layers of one CUDA stage, in the precision the run asks for
// (precision.matmul): bf16 GEMMs (gemm.hpp), or FP8 (fp8_gemm.hpp, issue 43) with E4M3
// activations and weights, E5M2 (or E4M3: precision.fp8_grad) output gradients, one
// dynamic scale per tensor, bf16 outputs and fp32 accumulation. The layers call these in
// place of gemm.hpp's launchers, with the weight named by its index in the ParamStore; the
// LM head, the embedding, the norms and attention stay bf16.
//
// What must hold:
// - bf16: exactly gemm.hpp's launches (the same bits as before precision.matmul existed);
// - fp8: each weight's FP8 copies (row-major for forward, transposed for backward_input)
//   are made once per change of the weights (ParamStore::values_version: after each
//   optimizer step or restore), not per micro-batch, on the compute stream before their
//   first use; activations and gradients are quantized where the GEMM needs them, on the
//   stream the GEMM runs on, with their own scale (dynamic) or their slot's (delayed: one
//   slot per layer and role, the input or the output gradient, whose step ends at the same
//   change of the weights); every launch is deterministic (the amax is an order-free
//   integer max, the GEMM algorithms pinned), so runs stay bitwise repeatable;
// - forward and backward_input run on the compute stream (they may make weight copies);
//   backward_weight on the stream it is given, touching no weight copy.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "kernels/cuda/fp8_quantize.hpp"
#include "kernels/cuda/fp8_recipe.hpp"
#include "kernels/cuda/model/param_store.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor {

/// What one linear layer's weight gradient reads in FP8, kept from the passes that made it
/// (issue 43, item 2): the input's transposed codes from forward, the output gradient's from
/// backward_input, each made in the same cast as the copy that pass's GEMM read. Without
/// them backward_weight casts both tensors again (two more reads of each under dynamic
/// scaling). Empty under bf16, and for what was not kept (an evaluation, a pass that
/// model.recompute redid without the layer); backward_weight then casts for itself, with the
/// same scale and so the same codes. Held with the stage's activations (BlockActs), so it is
/// released as they are: after the weight-gradient stream has read it.
struct LinearFp8Keep {
  std::shared_ptr<const Fp8Tensor> input, output_grad;
  void reset() { input.reset(), output_grad.reset(); }
};

class StageLinears {
 public:
  /// `fp8` unset: bf16 GEMMs. `params` outlives this.
  StageLinears(const ParamStore& params, int device, cudaStream_t stream,
               std::optional<Fp8Recipe> fp8)
      : params_(&params), device_(device), stream_(stream), fp8_(fp8) {}

  bool fp8() const { return fp8_.has_value(); }
  /// How many times a weight's FP8 copies were made (tests: once per weight and step).
  std::size_t weight_casts() const { return weight_casts_; }

  /// out (N, OC) = inp (N, IC) · W^T + bias, W the parameter `weight` (OC, IC); with
  /// pre_gelu: pre_gelu = that, out = gelu(pre_gelu). gemm.hpp's linear_forward. Under FP8,
  /// `keep` (when given) gets inp's transposed codes for backward_weight.
  void forward(bf16* out, bf16* pre_gelu, const bf16* inp, std::size_t weight, const bf16* bias,
               int N, int IC, int OC, LinearFp8Keep* keep = nullptr) const;
  /// dinp (N, IC) = dout (N, OC) · W, times gelu'(pre_gelu) with pre_gelu. Under FP8,
  /// `keep` (when given) gets dout's transposed codes for backward_weight.
  void backward_input(bf16* dinp, const bf16* dout, std::size_t weight, const bf16* pre_gelu, int N,
                      int IC, int OC, LinearFp8Keep* keep = nullptr) const;
  /// The gradient of W += dout^T inp, dbias += column sums of dout (when not null), on
  /// `stream`; G the store's gradient type. Under FP8 it reads `keep`'s codes where they
  /// were kept (REQUIRES: of these very dout and inp) and casts the rest.
  template <class G>
  void backward_weight(std::size_t weight, G* dbias, const bf16* dout, const bf16* inp, int N,
                       int IC, int OC, cudaStream_t stream,
                       const LinearFp8Keep* keep = nullptr) const;

 private:
  struct Fp8Weight {
    std::uint64_t version = 0;
    Fp8Tensor codes;  // rows: forward's W (OC, IC); transposed: backward_input's W^T (IC, OC)
  };
  // The FP8 copies of parameter `weight` (OC, IC) for the weights as they are now.
  const Fp8Tensor& fp8_weight(std::size_t weight, int OC, int IC) const;
  // x (rows, cols), the input (gradient = false) or the output gradient of the layer whose
  // weight is `weight`, in FP8 with the recipe's scaling.
  Fp8Tensor quantize(const bf16* x, int rows, int cols, std::size_t weight, bool gradient,
                     Fp8Copies copies, cudaStream_t stream, const char* what) const;

  struct Slot {
    std::uint64_t version = 0;  // the weights' version its step belongs to
    DelayedScale scale;
  };

  const ParamStore* params_;
  int device_;
  cudaStream_t stream_;
  std::optional<Fp8Recipe> fp8_;
  mutable std::unordered_map<std::size_t, Fp8Weight> weights_;  // by parameter index
  mutable std::size_t weight_casts_ = 0;
  mutable std::unordered_map<std::size_t, Slot> slots_;  // delayed: by 2 · weight + gradient
};

}  // namespace conveyor
