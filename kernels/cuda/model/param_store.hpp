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
// Gradients are f32 (optim.grad_dtype f32, the default) or bf16 (optim.grad_dtype bf16, as
// the PyTorch all-bf16 reference: half the bytes) in either recipe, accumulated with += by
// the backward launchers (fp32 sums, each launch rounding once per element into bf16),
// read by AdamW and the gradient norm in their type, zeroed by step(). Snapshots and
// captured state hold no gradients (they are taken between steps).
//
// Every method queues its work on the `stream` given at construction and runs on its
// device (the caller makes that device current). Thread-safety: none (one owner thread).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/model/cuda_state_snapshot.hpp"
#include "kernels/cuda/types.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/model/gradient_buckets.hpp"
#include "kernels/model/param.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {

class ParamStore {
 public:
  /// Uploads `initial` (host f32 values; names, shapes and decay flags are kept) and
  /// zeroes gradients and moments. Waits for the upload before returning. `grads_bf16`:
  /// gradients in bf16 instead of f32 (optim.grad_dtype).
  ParamStore(const std::vector<Param>& initial, bool master_fp32, int device,
             cudaStream_t stream, bool grads_bf16 = false);

  std::size_t size() const { return entries().size(); }
  const std::string& name(std::size_t i) const { return entries()[i].name; }

  /// The bf16 weights the kernels read.
  const bf16* value(std::size_t i) const { return values_.as<bf16>() + entries()[i].offset; }
  /// Changes whenever the weights do (an optimizer step, a restore): what is derived from
  /// them (the FP8 copies of stage_linears.hpp) is made again when it differs.
  std::uint64_t values_version() const { return values_version_; }
  /// Whether the gradients are bf16 (else f32).
  bool grads_bf16() const { return grads_bf16_; }
  /// The gradient (+=) of parameter i as G, float or bf16. Throws std::logic_error unless G
  /// is the type the gradients are held in (grads_bf16()).
  template <class G>
  G* grad(std::size_t i) const {
    static_assert(std::is_same_v<G, float> || std::is_same_v<G, bf16>);
    if (std::is_same_v<G, bf16> != grads_bf16_)
      throw std::logic_error(std::string("ParamStore::grad: the gradients are ") +
                             (grads_bf16_ ? "bf16" : "f32") + ", not " +
                             (std::is_same_v<G, bf16> ? "bf16" : "f32"));
    return grads_.as<G>() + entries()[i].offset;
  }

  /// The gradients of parameters [first, end) as one span of the flat buffer (the padding
  /// between them is included; it stays zero). REQUIRES: first < end <= size().
  GradientSpan grad_span(std::size_t first, std::size_t end) const;

  /// Per-parameter sums of squared gradients (f32 on the device, deterministic); waits.
  std::vector<double> grad_squares() const;

  /// One AdamW step over every parameter (one launch), then zero the gradients.
  void step(const AdamWConfig& config, double lr, float grad_scale);
  /// Zero the gradients, no update (a skipped step).
  void discard_grads();

  /// Host f32 copies of the current parameters (fp32 master, or bf16 widened); waits.
  std::vector<NamedTensor> weights() const;

  /// AdamW steps taken (the bias correction's t).
  std::int64_t steps() const { return steps_; }

  /// Training state under the names of kernels/model/state_names.hpp, host f32, in
  /// parameter order: <p>, then opt.m.<p> and opt.v.<p> once a step was taken (steps() >
  /// 0); bf16 values and moments are widened (exact). The same names, shapes and order as
  /// capture_param_state of the CPU model. One download per flat buffer and one wait for
  /// all of them. REQUIRES: no gradients pending (between steps).
  std::vector<NamedTensor> capture_state() const;

  /// Sets the parameters, moments and step count from `tensors` (host f32 as
  /// capture_state returns them; names of other stages are ignored) and zeroes the
  /// gradients; padding stays zero. fp32 master: master and moments take the values as
  /// they are, the bf16 copy is the master rounded to nearest even on the device, as
  /// adamw_update writes it. All bf16: values and moments rounded to nearest even (exact
  /// for a bf16 capture). Without opt.* tensors the moments are zeroed and the step count
  /// is 0 (AdamW starts afresh); with any, all are needed. Throws StateMismatch
  /// (kernels/model/param_state.hpp) naming a missing or misshapen tensor, or
  /// std::invalid_argument for a negative step count, before changing anything. Waits for
  /// the uploads: `tensors` may be freed on return.
  void restore_state(const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps);

  /// The state of capture_state() as a snapshot in pinned host memory, in this store's
  /// layout (cuda_state_snapshot.hpp): queued on a side stream after the work queued so far
  /// on `stream`, so it returns at once and the copy overlaps the next step's forward and
  /// backward; the next step() (or restore) waits for it on the device before changing
  /// the state. Pinned blocks are reused once no snapshot holds them.
  std::shared_ptr<const StateSnapshot> snapshot() const;
  /// Restores a snapshot: three host-to-device copies when it is a CudaStateSnapshot of
  /// the same layout (bitwise what it was taken from), else restore_state(its tensors()).
  /// Zeroes the gradients; waits for the copies.
  void restore_snapshot(const StateSnapshot& snapshot);

  /// Host f32 copies of the gradients accumulated so far (bf16 widened, exact; tests,
  /// debugging); waits.
  std::vector<NamedTensor> gradients() const;

  /// Device bytes held (weights, gradients, moments): bf16 gradients hold 2 bytes a
  /// (padded) element where f32 ones hold 4.
  std::size_t bytes() const;

  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

 private:
  // Host image of one flat buffer: f32, or bf16 bits (one of the two is filled).
  struct HostFlat {
    std::vector<float> f32;
    std::vector<std::uint16_t> bf16;
  };
  // Whether the flat state buffers (values or master, m, v) hold f32, else bf16.
  bool state_is_f32() const { return master_fp32_; }
  // The buffer holding the parameters as captured: the master, or the bf16 values.
  const DeviceBuffer& param_state_buffer() const { return master_fp32_ ? master_ : values_; }
  // Queues one copy of the whole of `flat` into `host`; the caller waits for the stream.
  void queue_download(const DeviceBuffer& flat, bool is_f32, HostFlat& host) const;
  // Parameter e's elements of `host` as a fresh f32 host tensor (bf16 widened).
  static Tensor piece(const HostFlat& host, const FlatLayout::Entry& e);
  // Every parameter's place in the flat buffers (the layout's entries, parameter order).
  const std::vector<FlatLayout::Entry>& entries() const { return layout_->entries; }
  // The tail every restore shares (see param_store.cpp).
  void finish_restore(bool with_moments, std::int64_t optimizer_steps);
  // One parameter's tensors in a restore's input (m, v null when no moments are given).
  struct Found {
    const Tensor* value = nullptr;
    const Tensor* m = nullptr;
    const Tensor* v = nullptr;
  };
  // Every parameter's Found, in order, each tensor checked to be host f32 of the
  // parameter's shape; throws StateMismatch naming the first that is missing or is not.
  std::vector<Found> find_state(const std::vector<NamedTensor>& tensors) const;
  // Uploads `pick(found)` of every parameter into `flat` as one padded image (f32 or
  // bf16 by `is_f32`, padding zero) and returns the image, which must outlive the copy.
  HostFlat queue_upload(const std::vector<Found>& found, const Tensor* Found::*pick,
                        DeviceBuffer& flat, bool is_f32) const;
  // Every parameter's elements of `flat` as host f32 tensors: one copy, one wait.
  std::vector<NamedTensor> download_params(const DeviceBuffer& flat, bool is_f32) const;
  // Queues a zero fill of `flat` (all of it, padding included).
  void queue_zero(DeviceBuffer& flat) const;

  std::int64_t total_ = 0;  // padded element count of every flat buffer
  bool master_fp32_;
  bool grads_bf16_;
  int device_;
  cudaStream_t stream_;
  std::int64_t steps_ = 0;
  std::uint64_t values_version_ = 1;

  DeviceBuffer master_;  // f32, fp32 recipe only
  DeviceBuffer values_;  // bf16
  DeviceBuffer grads_;   // f32 or bf16 (grads_bf16_)
  DeviceBuffer m_, v_;   // f32 or bf16
  DeviceBuffer decay_ends_, decay_flags_;  // DecayRuns: one run per parameter
  DeviceBuffer squares_;                   // f32, one per parameter
  DeviceBuffer square_segments_;           // i64: every parameter's offset, then its numel
  DeviceBuffer square_partials_;           // f32 scratch of grad_square_sums

  // Snapshots (snapshot()): the layout they record, the side stream their copies run on,
  // the events ordering them after the state's last write and before its next, and the
  // pinned blocks (a block is free when only this pool holds it).
  void ensure_snapshot_stream() const;
  std::shared_ptr<Storage> free_block() const;
  // Orders the next write of the state after every snapshot copy queued (device side).
  void wait_for_snapshot_copies();
  std::shared_ptr<const FlatLayout> layout_;
  mutable cudaStream_t snap_stream_ = nullptr;
  mutable cudaEvent_t state_ready_ = nullptr, snapshot_copied_ = nullptr;
  mutable bool copies_pending_ = false;
  mutable std::vector<std::shared_ptr<Storage>> pinned_blocks_;
};

}  // namespace conveyor
