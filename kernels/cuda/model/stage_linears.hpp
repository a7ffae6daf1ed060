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
  /// Codes made ahead, by the kernel that produced this layer's input or output gradient
  /// (StageLinears::produce), with both copies, and the bf16 tensor they are the codes of:
  /// the pass that reads that tensor takes them (its GEMM the rows, then kept as above);
  /// backward_weight reads their transposed copy when no pass took them (a recomputed
  /// forward that stops before this layer).
  std::shared_ptr<Fp8Tensor> ahead_input, ahead_output_grad;
  const bf16* ahead_input_of = nullptr;
  const bf16* ahead_output_grad_of = nullptr;
  /// The bf16 tensor whose producer wrote only its codes (Fp8Next::only_reader): a pass
  /// that would cast it refuses (its values were never written).
  const bf16* unwritten = nullptr;
  void reset() {
    input.reset(), output_grad.reset(), ahead_input.reset(), ahead_output_grad.reset();
    ahead_input_of = ahead_output_grad_of = unwritten = nullptr;
  }
};

/// The linear layer that reads a producer's output next (StageLinears::produce): its weight,
/// whether the output is that layer's input or its output gradient, and the codes' keep that
/// layer is given.
struct Fp8Next {
  std::size_t weight = 0;
  bool gradient = false;
  LinearFp8Keep* keep = nullptr;
  /// Nothing but that layer's GEMMs reads the output (no bias gradient, no other kernel):
  /// once its slot has a delayed scale, the producer writes the codes alone, not the bf16
  /// output (issue 43 item 2: a write of the tensor saved).
  bool only_reader = false;
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
  /// `keep` (when given) gets inp's transposed codes for backward_weight, and the GEMM reads
  /// its codes made ahead when there are some; with pre_gelu and `next`, the GELU makes
  /// out's codes for the layer that reads out (produce).
  void forward(bf16* out, bf16* pre_gelu, const bf16* inp, std::size_t weight, const bf16* bias,
               int N, int IC, int OC, LinearFp8Keep* keep = nullptr,
               const Fp8Next* next = nullptr) const;
  /// dinp (N, IC) = dout (N, OC) · W, times gelu'(pre_gelu) with pre_gelu. Under FP8,
  /// `keep` (when given) gets dout's transposed codes for backward_weight, and the GEMM reads
  /// its codes made ahead when there are some; with pre_gelu and `next`, GELU's backward
  /// makes dinp's codes for the layer whose output gradient dinp is (produce).
  void backward_input(bf16* dinp, const bf16* dout, std::size_t weight, const bf16* pre_gelu, int N,
                      int IC, int OC, LinearFp8Keep* keep = nullptr,
                      const Fp8Next* next = nullptr) const;
  /// The element-wise producer's output y (rows, cols) (fp8_fused_cast.hpp): by its
  /// stand-alone kernel under bf16, without `next` or with fused casts off; else in the
  /// kernel that also makes y's FP8 codes (both copies, the scale of next's slot) for the
  /// layer `next` names, left in next->keep for that layer's passes to take.
  void produce(const Fp8Producer& p, int rows, int cols, const Fp8Next* next) const;
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
  // weight is `weight`, in FP8 with the recipe's scaling; X a bf16 pointer, or an
  // Fp8Producer whose output it is (cast in the producer's pass).
  template <class X>
  Fp8Tensor quantize(const X& x, int rows, int cols, std::size_t weight, bool gradient,
                     Fp8Copies copies, cudaStream_t stream, const char* what) const;

  // The codes of x (rows, cols) that this pass's GEMM reads, the layer's input or output
  // gradient: made ahead by x's producer (taken from `keep`), else cast now (both copies
  // when kept).
  std::shared_ptr<Fp8Tensor> pass_codes(const bf16* x, int rows, int cols, std::size_t weight,
                                        bool gradient, LinearFp8Keep* keep) const;

  // Whether the slot of that layer's input (or output gradient) scales with a delayed
  // scale already (so a cast can run before the data's amax is known).
  bool delayed_scale_ready(std::size_t weight, bool gradient) const;

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
