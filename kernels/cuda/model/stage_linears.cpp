#include "kernels/cuda/model/stage_linears.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/gemm.hpp"

namespace conveyor {

const Fp8Tensor& StageLinears::fp8_weight(std::size_t weight, int OC, int IC) const {
  Fp8Weight& w = weights_[weight];
  const std::uint64_t now = params_->values_version();
  if (w.version != now) {
    // Released in stream order: the GEMMs that read the old copies were queued before.
    w.codes = Fp8Tensor(params_->value(weight), OC, IC, Fp8Kind::e4m3, Fp8Copies::both, device_,
                        stream_, params_->name(weight).c_str());
    w.version = now;
    ++weight_casts_;
  }
  return w.codes;
}

template <class X>
Fp8Tensor StageLinears::quantize(const X& x, int rows, int cols, std::size_t weight,
                                 bool gradient, Fp8Copies copies, cudaStream_t stream,
                                 const char* what) const {
  const Fp8Kind kind = gradient ? fp8_->grad : Fp8Kind::e4m3;
  if (fp8_->delayed_history == 0)
    return Fp8Tensor(x, rows, cols, kind, copies, device_, stream, what);
  auto [it, fresh] = slots_.try_emplace(2 * weight + (gradient ? 1 : 0));
  Slot& slot = it->second;
  const std::uint64_t now = params_->values_version();
  if (fresh) {
    slot.scale = DelayedScale(fp8_->delayed_history, kind, device_, stream);
    slot.version = now;
  } else if (slot.version != now) {
    slot.scale.roll(stream);  // the weights changed: the slot's step is over
    slot.version = now;
  }
  return Fp8Tensor(x, rows, cols, slot.scale, copies, device_, stream, what);
}

namespace {

// The codes a GEMM of this pass reads (rows) and, when kept, the transposed ones for
// backward_weight: both from one cast; the row-major copy is freed once its GEMM is queued
// (stream order makes that safe), so a kept tensor costs one byte per element.
std::shared_ptr<const Fp8Tensor> keep_transposed(std::shared_ptr<Fp8Tensor> q) {
  q->drop_rows();
  return q;
}

// The codes made ahead of `x` (a producer's, StageLinears::produce) that this pass takes,
// or null. They must be x's: a keep that holds another tensor's codes is a caller's bug.
std::shared_ptr<Fp8Tensor> take_ahead(std::shared_ptr<Fp8Tensor>& ahead, const bf16*& of,
                                      const bf16* x) {
  if (!ahead || !ahead->has_rows()) return nullptr;
  if (of != x)
    throw std::logic_error("StageLinears: the codes made ahead for this layer are of another tensor");
  of = nullptr;
  return std::move(ahead);
}

// A pass about to cast x itself: refused when x's producer left it unwritten.
void refuse_unwritten(const LinearFp8Keep* keep, const bf16* x) {
  if (keep && keep->unwritten == x)
    throw std::logic_error(
        "StageLinears: a pass would cast a tensor whose producer wrote only its FP8 codes");
}

// The transposed codes backward_weight reads: kept by a pass, else made ahead and not taken.
const Fp8Tensor* transposed_codes(const std::shared_ptr<const Fp8Tensor>& kept,
                                  const std::shared_ptr<Fp8Tensor>& ahead, const bf16* ahead_of,
                                  const bf16* x) {
  if (kept) return kept.get();
  return ahead && ahead_of == x ? ahead.get() : nullptr;
}

}  // namespace

std::shared_ptr<Fp8Tensor> StageLinears::pass_codes(const bf16* x, int rows, int cols,
                                                     std::size_t weight, bool gradient,
                                                     LinearFp8Keep* keep) const {
  if (keep) {
    auto ahead = gradient ? take_ahead(keep->ahead_output_grad, keep->ahead_output_grad_of, x)
                          : take_ahead(keep->ahead_input, keep->ahead_input_of, x);
    if (ahead) return ahead;
  }
  refuse_unwritten(keep, x);
  return std::make_shared<Fp8Tensor>(
      quantize(x, rows, cols, weight, gradient, keep ? Fp8Copies::both : Fp8Copies::rows, stream_,
               gradient ? "a linear layer's output gradient" : "a linear layer's input"));
}

void StageLinears::forward(bf16* out, bf16* pre_gelu, const bf16* inp, std::size_t weight,
                           const bf16* bias, int N, int IC, int OC, LinearFp8Keep* keep,
                           const Fp8Next* next) const {
  if (!fp8_) {
    linear_forward(out, pre_gelu, inp, params_->value(weight), bias, N, IC, OC, stream_);
    return;
  }
  const Fp8Tensor& w = fp8_weight(weight, OC, IC);
  std::shared_ptr<Fp8Tensor> x = pass_codes(inp, N, IC, weight, false, keep);
  fp8_linear_forward(pre_gelu ? pre_gelu : out, x->operand(), w.operand(), bias, N, IC, OC, stream_);
  if (pre_gelu) produce({Fp8Producer::Op::gelu, out, pre_gelu}, N, OC, next);
  if (keep) keep->input = keep_transposed(std::move(x));
}

void StageLinears::backward_input(bf16* dinp, const bf16* dout, std::size_t weight,
                                  const bf16* pre_gelu, int N, int IC, int OC,
                                  LinearFp8Keep* keep, const Fp8Next* next) const {
  if (!fp8_) {
    linear_backward_input(dinp, dout, params_->value(weight), pre_gelu, N, IC, OC, stream_);
    return;
  }
  const Fp8Tensor& w = fp8_weight(weight, OC, IC);
  std::shared_ptr<Fp8Tensor> d = pass_codes(dout, N, OC, weight, true, keep);
  fp8_linear_backward_input(dinp, d->operand(), w.transposed(), N, IC, OC, stream_);
  if (pre_gelu) produce({Fp8Producer::Op::gelu_backward, dinp, dinp, pre_gelu}, N, IC, next);
  if (keep) keep->output_grad = keep_transposed(std::move(d));
}

void StageLinears::produce(const Fp8Producer& p, int rows, int cols, const Fp8Next* next) const {
  if (!fp8_ || !next || !next->keep || !fp8_->fused_casts) {
    conveyor::produce(p, rows, cols, stream_);
    return;
  }
  LinearFp8Keep& keep = *next->keep;
  // The codes alone when nothing else reads y and the slot's scale is known before the data
  // (a dynamic scale, or a slot's first step, needs y written to cast it after its amax).
  Fp8Producer q = p;
  const bool codes_only = next->only_reader && delayed_scale_ready(next->weight, next->gradient);
  if (codes_only) q.y = nullptr;
  auto codes = std::make_shared<Fp8Tensor>(
      quantize(q, rows, cols, next->weight, next->gradient, Fp8Copies::both, stream_,
               next->gradient ? "a linear layer's output gradient" : "a linear layer's input"));
  (next->gradient ? keep.ahead_output_grad : keep.ahead_input) = std::move(codes);
  (next->gradient ? keep.ahead_output_grad_of : keep.ahead_input_of) = p.y;
  keep.unwritten = codes_only ? p.y : nullptr;
}

bool StageLinears::delayed_scale_ready(std::size_t weight, bool gradient) const {
  if (fp8_->delayed_history == 0) return false;
  const auto it = slots_.find(2 * weight + (gradient ? 1 : 0));
  return it != slots_.end() && it->second.scale.steps() > 0;
}

template <class G>
void StageLinears::backward_weight(std::size_t weight, G* dbias, const bf16* dout, const bf16* inp,
                                   int N, int IC, int OC, cudaStream_t stream,
                                   const LinearFp8Keep* keep) const {
  G* dweight = params_->grad<G>(weight);
  if (!fp8_) {
    linear_backward_weight(dweight, dbias, dout, inp, N, IC, OC, stream);
    return;
  }
  // What was not kept is cast here, on this stream (its buffers are this stream's).
  Fp8Tensor d_cast, x_cast;
  const Fp8Tensor* d =
      keep ? transposed_codes(keep->output_grad, keep->ahead_output_grad, keep->ahead_output_grad_of, dout)
           : nullptr;
  const Fp8Tensor* x =
      keep ? transposed_codes(keep->input, keep->ahead_input, keep->ahead_input_of, inp) : nullptr;
  if (!d) {
    refuse_unwritten(keep, dout);
    d_cast = quantize(dout, N, OC, weight, true, Fp8Copies::transposed, stream,
                      "a linear layer's output gradient");
    d = &d_cast;
  }
  if (!x) {
    refuse_unwritten(keep, inp);
    x_cast = quantize(inp, N, IC, weight, false, Fp8Copies::transposed, stream,
                      "a linear layer's input");
    x = &x_cast;
  }
  fp8_linear_backward_weight(dweight, d->transposed(), x->transposed(), N, IC, OC, stream);
  if (dbias) linear_backward_bias(dbias, dout, N, OC, stream);
}

template void StageLinears::backward_weight<float>(std::size_t, float*, const bf16*, const bf16*,
                                                   int, int, int, cudaStream_t,
                                                   const LinearFp8Keep*) const;
template void StageLinears::backward_weight<bf16>(std::size_t, bf16*, const bf16*, const bf16*, int,
                                                  int, int, cudaStream_t,
                                                  const LinearFp8Keep*) const;

}  // namespace conveyor
