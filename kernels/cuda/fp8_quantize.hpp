#pragma once
// A bf16 tensor quantized to FP8 with one scale per tensor, its codes as the FP8 GEMMs read
// them (fp8_gemm.hpp): row-major, transposed, or both, made in one pass over the data.
//   dynamic  (precision.fp8_scaling dynamic, torchao's tensorwise recipe) its amax, its
//            scale from that amax, then the codes: three launches;
//   delayed  (fp8_delayed_scale.hpp) the codes with its slot's scale, the amax found in the
//            same pass and recorded into the slot: one pass over the data.
// On one stream, no host sync.
// What must hold: the codes are fp8(x * scale) under the hardware's saturating RNE, the
// operand's dequantization factor is 1 / scale, or NaN when the tensor holds a non-finite
// value (an overflow upstream, fp8_cast.hpp), all on the device.
#include <cstdint>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/fp8_delayed_scale.hpp"
#include "kernels/cuda/fp8_fused_cast.hpp"
#include "kernels/cuda/fp8_gemm.hpp"

namespace conveyor {

/// Which copies of the codes to make.
enum class Fp8Copies { rows, transposed, both };

class Fp8Tensor {
 public:
  Fp8Tensor() = default;
  /// The codes of x (rows, cols) in `kind`, allocated on `stream` (the caching allocator's
  /// rule: used on that stream, or ordered after it).
  Fp8Tensor(const bf16* x, int rows, int cols, Fp8Kind kind, Fp8Copies copies, int device,
            cudaStream_t stream, const char* what);

  /// Delayed scaling with `slot`'s scale (dynamic while the slot has no history), the
  /// tensor's amax recorded into the slot's step.
  Fp8Tensor(const bf16* x, int rows, int cols, const DelayedScale& slot, Fp8Copies copies,
            int device, cudaStream_t stream, const char* what);

  /// The codes of a producer's output y (rows, cols) made in the producer's own pass
  /// (fp8_fused_cast.hpp), which writes y too: dynamic scaling (its amax found there, then
  /// one cast reading y), or delayed with `slot` (no second pass over y). The same codes,
  /// scales and slot records as the constructors above over the finished y.
  Fp8Tensor(const Fp8Producer& producer, int rows, int cols, Fp8Kind kind, Fp8Copies copies,
            int device, cudaStream_t stream, const char* what);
  Fp8Tensor(const Fp8Producer& producer, int rows, int cols, const DelayedScale& slot,
            Fp8Copies copies, int device, cudaStream_t stream, const char* what);

  /// Whether the row-major codes are there (made with rows or both, not dropped).
  bool has_rows() const { return codes_.data() != nullptr; }
  /// The (rows, cols) codes as a GEMM operand. REQUIRES: made with rows or both.
  Fp8Operand operand() const;
  /// The (cols, rows) codes. REQUIRES: made with transposed or both.
  Fp8Operand transposed() const;
  /// Frees the row-major codes (in stream order: after the launches queued so far that read
  /// them), keeping the transposed ones and the scales.
  void drop_rows() { codes_.reset(); }
  /// Device floats: the tensor's amax, its scale (dynamic scaling; delayed scaling casts
  /// with its slot's), and the dequantization factor its GEMM operand carries.
  const float* amax() const { return scales_.as<float>(); }
  const float* scale() const { return scales_.as<float>() + kScaleStride; }
  const float* dequant() const { return scales_.as<float>() + 2 * kScaleStride; }
  bool empty() const { return scales_.data() == nullptr; }

 private:
  void allocate(int rows, int cols, Fp8Copies copies, int device, cudaStream_t stream,
                const char* what);
  // X: a bf16 tensor in memory, or an Fp8Producer (its output cast in its own pass).
  template <class X>
  void quantize_dynamic(const X& x, int rows, int cols, cudaStream_t stream);
  template <class X>
  void quantize_delayed(const X& x, int rows, int cols, const DelayedScale& slot,
                        cudaStream_t stream);

  // The three floats 16 bytes apart: cuBLASLt refuses (CUBLAS_STATUS_NOT_SUPPORTED, at
  // the matmul, not at the heuristic) scale pointers that are not 16-byte aligned.
  static constexpr int kScaleStride = 4;
  float* at(int k) const { return scales_.as<float>() + k * kScaleStride; }

  DeviceBuffer codes_, codes_t_, scales_;
  Fp8Kind kind_ = Fp8Kind::e4m3;
};

}  // namespace conveyor
