#pragma once
// A stage's parameters, gradients and AdamW state on one device, as flat buffers.
//
// Layout: parameter i occupies [offset(i), offset(i) + numel(i)) of every flat buffer, in
// GptStage's parameter order; offsets are rounded up to 128 elements so every parameter
// starts 256-byte aligned (the GEMMs pick their algorithm by alignment, so a parameter
// gets the same algorithm whatever the split). The padding stays zero: AdamW maps
// (w, g, m, v) = 0 to 0.
//
// Two recipes (CudaStageOptions::master_fp32):
//   fp32 master: master f32 + m, v f32; `values` is the bf16 copy the kernels read,
//                rewritten by every step (adamw_update's compute output).
//   all bf16:    `values` bf16 is the parameter itself; m, v bf16 (adamw_update_bf16).
// Gradients are f32 in both, accumulated with += by the backward launchers, zeroed by
// step().
//
// Every method queues its work on the `stream` given at construction and runs on its
// device (the caller makes that device current). Thread-safety: none (one owner thread).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/types.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/model/param.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {

class ParamStore {
 public:
  /// Uploads `initial` (host f32 values; names, shapes and decay flags are kept) and
  /// zeroes gradients and moments. Waits for the upload before returning.
  ParamStore(const std::vector<Param>& initial, bool master_fp32, int device,
             cudaStream_t stream);

  std::size_t size() const { return meta_.size(); }
  const std::string& name(std::size_t i) const { return meta_[i].name; }

  /// The bf16 weights the kernels read, and the f32 gradient (+=) of parameter i.
  const bf16* value(std::size_t i) const { return values_.as<bf16>() + meta_[i].offset; }
  float* grad(std::size_t i) const { return grads_.as<float>() + meta_[i].offset; }

  /// Per-parameter sums of squared gradients (f32 on the device, deterministic); waits.
  std::vector<double> grad_squares() const;

  /// One AdamW step over every parameter (one launch), then zero the gradients.
  void step(const AdamWConfig& config, double lr, float grad_scale);
  /// Zero the gradients, no update (a skipped step).
  void discard_grads();

  /// Host f32 copies of the current parameters (fp32 master, or bf16 widened); waits.
  std::vector<NamedTensor> weights() const;

  /// Host copies of the f32 gradients accumulated so far (tests, debugging); waits.
  std::vector<NamedTensor> gradients() const;

  /// Device bytes held (weights, gradients, moments).
  std::size_t bytes() const;

 private:
  struct Meta {
    std::string name;
    Shape shape;
    std::int64_t offset = 0, numel = 0;
    bool decay = true;
  };
  std::vector<NamedTensor> download_f32(const DeviceBuffer& flat) const;

  std::vector<Meta> meta_;
  std::int64_t total_ = 0;  // padded element count of every flat buffer
  bool master_fp32_;
  int device_;
  cudaStream_t stream_;
  std::int64_t steps_ = 0;

  DeviceBuffer master_;  // f32, fp32 recipe only
  DeviceBuffer values_;  // bf16
  DeviceBuffer grads_;   // f32
  DeviceBuffer m_, v_;   // f32 or bf16
  DeviceBuffer decay_ends_, decay_flags_;  // DecayRuns: one run per parameter
  DeviceBuffer squares_;                   // f32, one per parameter
};

}  // namespace conveyor
