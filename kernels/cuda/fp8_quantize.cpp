#include "kernels/cuda/fp8_quantize.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/fp8_cast.hpp"

namespace conveyor {

void Fp8Tensor::allocate(int rows, int cols, Fp8Copies copies, int device, cudaStream_t stream,
                         const char* what) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const std::string label = std::string("FP8 codes of ") + what;
  if (copies != Fp8Copies::transposed) codes_ = DeviceBuffer(n, device, stream, label);
  if (copies != Fp8Copies::rows)
    codes_t_ = DeviceBuffer(n, device, stream, label + " (transposed)");
  scales_ = DeviceBuffer(3 * kScaleStride * sizeof(float), device, stream, "FP8 scale");
}

namespace {

// What the quantization below does with a tensor in memory, or with a producer's output made
// in the same pass (fp8_fused_cast.hpp): its amax, the bf16 values a later cast reads, and
// the cast with a known scale that records the amax in the same pass.
void amax_pass(const bf16* x, int rows, int cols, float* amax, Fp8Kind, cudaStream_t stream) {
  fp8_amax(amax, x, std::int64_t{rows} * cols, stream);
}
void amax_pass(const Fp8Producer& p, int rows, int cols, float* amax, Fp8Kind kind,
               cudaStream_t stream) {
  produce_fp8(p, rows, cols, nullptr, nullptr, nullptr, amax, kind, stream);
}
const bf16* values_of(const bf16* x) { return x; }
const bf16* values_of(const Fp8Producer& p) { return p.y; }
void cast_pass(const bf16* x, int rows, int cols, std::uint8_t* out, std::uint8_t* out_t,
               const float* scale, float* amax, Fp8Kind kind, cudaStream_t stream) {
  cast_transpose_to_fp8_with_amax(out, out_t, x, rows, cols, scale, amax, kind, stream);
}
void cast_pass(const Fp8Producer& p, int rows, int cols, std::uint8_t* out, std::uint8_t* out_t,
               const float* scale, float* amax, Fp8Kind kind, cudaStream_t stream) {
  produce_fp8(p, rows, cols, out, out_t, scale, amax, kind, stream);
}

}  // namespace

template <class X>
void Fp8Tensor::quantize_dynamic(const X& x, int rows, int cols, cudaStream_t stream) {
  amax_pass(x, rows, cols, at(0), kind_, stream);
  fp8_scale_from_amax(at(1), at(2), at(0), kind_, stream);
  cast_transpose_to_fp8(codes_.as<std::uint8_t>(), codes_t_.as<std::uint8_t>(), values_of(x), rows,
                        cols, at(1), kind_, stream);
}

template <class X>
void Fp8Tensor::quantize_delayed(const X& x, int rows, int cols, const DelayedScale& slot,
                                 cudaStream_t stream) {
  if (slot.steps() == 0) {
    quantize_dynamic(x, rows, cols, stream);
    record_amax(slot, at(0), stream);
    return;
  }
  cast_pass(x, rows, cols, codes_.as<std::uint8_t>(), codes_t_.as<std::uint8_t>(), slot.scale(),
            at(0), kind_, stream);
  finish_delayed_cast(at(2), at(0), slot, stream);
}

Fp8Tensor::Fp8Tensor(const bf16* x, int rows, int cols, Fp8Kind kind, Fp8Copies copies, int device,
                     cudaStream_t stream, const char* what)
    : kind_(kind) {
  allocate(rows, cols, copies, device, stream, what);
  quantize_dynamic(x, rows, cols, stream);
}

Fp8Tensor::Fp8Tensor(const bf16* x, int rows, int cols, const DelayedScale& slot, Fp8Copies copies,
                     int device, cudaStream_t stream, const char* what)
    : kind_(slot.kind()) {
  allocate(rows, cols, copies, device, stream, what);
  quantize_delayed(x, rows, cols, slot, stream);
}

Fp8Tensor::Fp8Tensor(const Fp8Producer& producer, int rows, int cols, Fp8Kind kind,
                     Fp8Copies copies, int device, cudaStream_t stream, const char* what)
    : kind_(kind) {
  allocate(rows, cols, copies, device, stream, what);
  quantize_dynamic(producer, rows, cols, stream);
}

Fp8Tensor::Fp8Tensor(const Fp8Producer& producer, int rows, int cols, const DelayedScale& slot,
                     Fp8Copies copies, int device, cudaStream_t stream, const char* what)
    : kind_(slot.kind()) {
  allocate(rows, cols, copies, device, stream, what);
  quantize_delayed(producer, rows, cols, slot, stream);
}

Fp8Operand Fp8Tensor::operand() const {
  if (!codes_.data()) throw std::logic_error("Fp8Tensor: no row-major codes were made");
  return {codes_.as<std::uint8_t>(), kind_, dequant()};
}

Fp8Operand Fp8Tensor::transposed() const {
  if (!codes_t_.data()) throw std::logic_error("Fp8Tensor: no transposed codes were made");
  return {codes_t_.as<std::uint8_t>(), kind_, dequant()};
}

}  // namespace conveyor
