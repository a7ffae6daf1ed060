#include "kernels/cuda/model/stage_linears.hpp"

#include <memory>
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

Fp8Tensor StageLinears::quantize(const bf16* x, int rows, int cols, std::size_t weight,
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
std::shared_ptr<const Fp8Tensor> keep_transposed(Fp8Tensor&& q) {
  q.drop_rows();
  return std::make_shared<const Fp8Tensor>(std::move(q));
}

}  // namespace

void StageLinears::forward(bf16* out, bf16* pre_gelu, const bf16* inp, std::size_t weight,
                           const bf16* bias, int N, int IC, int OC, LinearFp8Keep* keep) const {
  if (!fp8_) {
    linear_forward(out, pre_gelu, inp, params_->value(weight), bias, N, IC, OC, stream_);
    return;
  }
  const Fp8Tensor& w = fp8_weight(weight, OC, IC);
  Fp8Tensor x = quantize(inp, N, IC, weight, false, keep ? Fp8Copies::both : Fp8Copies::rows,
                         stream_, "a linear layer's input");
  fp8_linear_forward(pre_gelu ? pre_gelu : out, x.operand(), w.operand(), bias, N, IC, OC, stream_);
  if (pre_gelu) gelu_forward(out, pre_gelu, std::int64_t{N} * OC, stream_);
  if (keep) keep->input = keep_transposed(std::move(x));
}

void StageLinears::backward_input(bf16* dinp, const bf16* dout, std::size_t weight,
                                  const bf16* pre_gelu, int N, int IC, int OC,
                                  LinearFp8Keep* keep) const {
  if (!fp8_) {
    linear_backward_input(dinp, dout, params_->value(weight), pre_gelu, N, IC, OC, stream_);
    return;
  }
  const Fp8Tensor& w = fp8_weight(weight, OC, IC);
  Fp8Tensor d = quantize(dout, N, OC, weight, true, keep ? Fp8Copies::both : Fp8Copies::rows,
                         stream_, "a linear layer's output gradient");
  fp8_linear_backward_input(dinp, d.operand(), w.transposed(), N, IC, OC, stream_);
  if (pre_gelu) gelu_backward_input(dinp, dinp, pre_gelu, std::int64_t{N} * IC, stream_);
  if (keep) keep->output_grad = keep_transposed(std::move(d));
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
  const Fp8Tensor* d = keep ? keep->output_grad.get() : nullptr;
  const Fp8Tensor* x = keep ? keep->input.get() : nullptr;
  if (!d) {
    d_cast = quantize(dout, N, OC, weight, true, Fp8Copies::transposed, stream,
                      "a linear layer's output gradient");
    d = &d_cast;
  }
  if (!x) {
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
