#include "kernels/cuda/model/param_store.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string_view>

#include "kernels/cuda/adamw.hpp"
#include "kernels/tensor/bf16.hpp"
#include "kernels/cuda/cast.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "kernels/cuda/grad_norm.hpp"
#include "kernels/model/param_state.hpp"
#include "kernels/model/state_names.hpp"
#include "kernels/tensor/storage.hpp"

namespace conveyor {
namespace {

constexpr std::int64_t kAlignElements = 128;  // 256 bytes of bf16, 512 of f32

std::int64_t round_up(std::int64_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

DeviceBuffer zeroed(std::size_t bytes, int device, cudaStream_t stream, const char* label) {
  DeviceBuffer b(bytes, device, stream, label);
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(b.data(), 0, bytes, stream));
  return b;
}

}  // namespace

ParamStore::ParamStore(const std::vector<Param>& initial, bool master_fp32, int device,
                       cudaStream_t stream, bool grads_bf16)
    : master_fp32_(master_fp32), grads_bf16_(grads_bf16), device_(device), stream_(stream) {
  // The layout is the one record of where each parameter lives in the flat buffers; the
  // snapshots this store takes share it.
  auto layout = std::make_shared<FlatLayout>();
  layout->f32 = master_fp32_;
  for (const Param& p : initial) {
    if (!p.value.defined() || p.value.dtype() != DType::f32 || !p.value.device().is_cpu())
      throw std::invalid_argument("ParamStore: parameter " + p.name + " must be f32 on cpu, got " +
                                  p.value.describe());
    layout->entries.push_back({p.name, p.value.shape(), total_, p.value.numel()});
    total_ += round_up(p.value.numel());
  }
  layout->total = total_;
  layout_ = layout;
  const auto& meta = entries();
  const auto n = static_cast<std::size_t>(total_);

  // Host images of the flat buffers, padding zero: fresh pages (allocate_host), written by
  // all cores (each element from its own source element alone) — a serial copy and
  // rounding of the 1B model's 1.3G values cost seconds of every start.
  const auto image_f32 = allocate_host(master_fp32_ ? n * sizeof(float) : 0, HostZeros::fresh_pages);
  const auto image_bf16 = allocate_host(n * sizeof(std::uint16_t), HostZeros::fresh_pages);
  float* host_f32 = static_cast<float*>(image_f32->data());
  auto* host_bf16 = static_cast<std::uint16_t*>(image_bf16->data());
  for (std::size_t i = 0; i < meta.size(); ++i) {
    const float* src = initial[i].value.f32();
    const auto off = static_cast<std::int64_t>(meta[i].offset);
    const std::int64_t count = meta[i].numel;
#pragma omp parallel for schedule(static) if (count >= (std::int64_t{1} << 18))
    for (std::int64_t k = 0; k < count; ++k) {
      if (master_fp32_) host_f32[off + k] = src[k];
      host_bf16[off + k] = float_to_bf16_bits(src[k]);
    }
  }

  // Decay runs: run i ends where parameter i + 1 starts (its padding shares its flag).
  std::vector<std::int64_t> ends(meta.size());
  std::vector<std::uint8_t> flags(meta.size());
  for (std::size_t i = 0; i < meta.size(); ++i) {
    ends[i] = i + 1 < meta.size() ? meta[i + 1].offset : total_;
    flags[i] = initial[i].decay ? 1 : 0;
  }

  const std::size_t moment_bytes = n * (master_fp32_ ? sizeof(float) : sizeof(bf16));
  if (master_fp32_) master_ = DeviceBuffer(n * sizeof(float), device, stream, "fp32 master weights");
  values_ = DeviceBuffer(n * sizeof(bf16), device, stream, "bf16 weights");
  grads_ = grads_bf16_ ? zeroed(n * sizeof(bf16), device, stream, "bf16 weight gradients")
                      : zeroed(n * sizeof(float), device, stream, "f32 weight gradients");
  m_ = zeroed(moment_bytes, device, stream, "AdamW first moments");
  v_ = zeroed(moment_bytes, device, stream, "AdamW second moments");
  decay_ends_ = DeviceBuffer(ends.size() * sizeof(std::int64_t), device, stream, "AdamW decay runs");
  decay_flags_ = DeviceBuffer(flags.size(), device, stream, "AdamW decay flags");
  squares_ = DeviceBuffer(meta.size() * sizeof(float), device, stream, "gradient squares");
  // Each parameter a segment of the flat gradients, summed in one batch (grad_squares).
  std::vector<std::int64_t> segments(2 * meta.size());
  for (std::size_t i = 0; i < meta.size(); ++i) {
    segments[i] = meta[i].offset;
    segments[meta.size() + i] = meta[i].numel;
  }
  square_segments_ = DeviceBuffer(segments.size() * sizeof(std::int64_t), device, stream,
                                  "gradient square segments");
  square_partials_ = DeviceBuffer(grad_square_sum_partials(static_cast<int>(meta.size())) * sizeof(float),
                                  device, stream, "gradient square partials");

  if (master_fp32_)
    CUDA_CHECK(cudaMemcpyAsync(master_.data(), host_f32, n * sizeof(float),
                               cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(values_.data(), host_bf16, n * sizeof(bf16),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(decay_ends_.data(), ends.data(), ends.size() * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(decay_flags_.data(), flags.data(), flags.size(),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(square_segments_.data(), segments.data(),
                             segments.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));  // the host images go out of scope
}

ParamStore::~ParamStore() {
  // Snapshots still held elsewhere own their blocks; only the copies must be done.
  if (snap_stream_) {
    (void)cudaStreamSynchronize(snap_stream_);
    (void)cudaStreamDestroy(snap_stream_);
  }
  if (state_ready_) (void)cudaEventDestroy(state_ready_);
  if (snapshot_copied_) (void)cudaEventDestroy(snapshot_copied_);
}

std::vector<double> ParamStore::grad_squares() const {
  float* out = squares_.as<float>();
  const int count = static_cast<int>(entries().size());
  const SquareSumSegments segments{square_segments_.as<std::int64_t>(),
                                   square_segments_.as<std::int64_t>() + count,
                                   square_partials_.as<float>(), count};
  if (grads_bf16_)
    grad_square_sums(out, grads_.as<bf16>(), segments, stream_);
  else
    grad_square_sums(out, grads_.as<float>(), segments, stream_);
  std::vector<float> host(entries().size());
  CUDA_CHECK(cudaMemcpyAsync(host.data(), out, host.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return std::vector<double>(host.begin(), host.end());
}

void ParamStore::step(const AdamWConfig& config, double lr, float grad_scale) {
  wait_for_snapshot_copies();  // AdamW rewrites what a snapshot may still be copying
  AdamWHyper hp;
  hp.lr = static_cast<float>(lr);
  hp.beta1 = config.beta1;
  hp.beta2 = config.beta2;
  hp.eps = config.eps;
  hp.weight_decay = config.weight_decay;
  hp.grad_scale = grad_scale;
  adamw_bias_corrections(hp, ++steps_);
  ++values_version_;
  const DecayRuns runs{decay_ends_.as<std::int64_t>(), decay_flags_.as<std::uint8_t>(),
                       static_cast<int>(entries().size())};
  auto update = [&](const auto* grads) {  // float or bf16: the launchers' overloads
    if (master_fp32_)
      adamw_update(master_.as<float>(), values_.as<bf16>(), grads, m_.as<float>(),
                   v_.as<float>(), total_, hp, runs, stream_);
    else
      adamw_update_bf16(values_.as<bf16>(), grads, m_.as<bf16>(), v_.as<bf16>(), total_, hp,
                        runs, stream_);
  };
  if (grads_bf16_)
    update(grads_.as<bf16>());
  else
    update(grads_.as<float>());
  CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
}

void ParamStore::discard_grads() {
  CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
}

std::vector<NamedTensor> ParamStore::weights() const {
  return download_params(param_state_buffer(), state_is_f32());
}

GradientSpan ParamStore::grad_span(std::size_t first, std::size_t end) const {
  if (first >= end || end > size())
    throw std::out_of_range("ParamStore::grad_span: parameters [" + std::to_string(first) + ", " +
                            std::to_string(end) + ") of " + std::to_string(size()));
  const auto& last = entries()[end - 1];
  const std::int64_t begin = entries()[first].offset;
  const std::size_t count = static_cast<std::size_t>(last.offset + last.numel - begin);
  if (grads_bf16_) return GradientSpan{grad<bf16>(first), count, DType::bf16};
  return GradientSpan{grad<float>(first), count, DType::f32};
}

std::vector<NamedTensor> ParamStore::gradients() const {
  return download_params(grads_, /*is_f32=*/!grads_bf16_);
}

// ---- training state

std::vector<NamedTensor> ParamStore::capture_state() const {
  // The moments are state once AdamW has run; before that the state is the parameters
  // alone, as on the CPU (AdamWState::m still empty).
  const bool with_opt = steps_ > 0;
  HostFlat values, m, v;
  queue_download(param_state_buffer(), state_is_f32(), values);
  if (with_opt) {
    queue_download(m_, state_is_f32(), m);
    queue_download(v_, state_is_f32(), v);
  }
  // After every queued step and backward on the stream; the host images are complete.
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<NamedTensor> out;
  out.reserve(entries().size() * (with_opt ? 3 : 1));
  for (const FlatLayout::Entry& meta : entries()) {
    out.push_back(NamedTensor{meta.name, piece(values, meta)});
    if (with_opt) {
      out.push_back(NamedTensor{opt_m_name(meta.name), piece(m, meta)});
      out.push_back(NamedTensor{opt_v_name(meta.name), piece(v, meta)});
    }
  }
  return out;
}

void ParamStore::restore_state(const std::vector<NamedTensor>& tensors,
                               std::int64_t optimizer_steps) {
  if (optimizer_steps < 0)
    throw std::invalid_argument("ParamStore::restore_state: negative optimizer step count " +
                                std::to_string(optimizer_steps));
  // Everything is checked before the first upload, so a mismatch leaves the store as it was.
  const std::vector<Found> found = find_state(tensors);
  wait_for_snapshot_copies();
  const bool with_opt = !found.empty() && found.front().m != nullptr;

  std::vector<HostFlat> images;  // read by the queued copies: kept until the wait below
  images.reserve(3);
  // Without a master, narrowed on the host (float_to_bf16_bits, RNE, bitwise the device's
  // conversion); a captured bf16 value comes back unchanged since widening was exact.
  images.push_back(queue_upload(found, &Found::value, master_fp32_ ? master_ : values_,
                                /*is_f32=*/master_fp32_));
  if (with_opt) {
    images.push_back(queue_upload(found, &Found::m, m_, state_is_f32()));
    images.push_back(queue_upload(found, &Found::v, v_, state_is_f32()));
  }
  finish_restore(with_opt, optimizer_steps);
}

// After the uploads of a restore are queued on stream_: the bf16 compute copy exactly as
// adamw_update writes it after a step (round to nearest even of the fp32 master, on the
// device, so a restored model computes with the very bits the captured one did), moments
// zeroed when none came, gradients zeroed; waits for all of it. As the CPU's
// restore_param_state, the step count means nothing without moments.
void ParamStore::finish_restore(bool with_moments, std::int64_t optimizer_steps) {
  if (master_fp32_) cast_f32_to_bf16(values_.as<bf16>(), master_.as<float>(), total_, stream_);
  if (!with_moments) {
    queue_zero(m_);
    queue_zero(v_);
  }
  queue_zero(grads_);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  steps_ = with_moments ? optimizer_steps : 0;
  ++values_version_;
}

std::vector<ParamStore::Found> ParamStore::find_state(
    const std::vector<NamedTensor>& tensors) const {
  std::map<std::string_view, const Tensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t.tensor;  // the last of a name wins
  auto find = [&](const std::string& name, const FlatLayout::Entry& meta) -> const Tensor* {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw StateMismatch("missing tensor " + name);
    const Tensor& t = *it->second;
    // Host f32 of the parameter's shape: what capture_state (here or on the CPU) produces.
    if (!t.defined() || t.dtype() != DType::f32 || t.shape() != meta.shape || !t.device().is_cpu())
      throw StateMismatch("tensor " + name + " is " + t.describe() + ", the stage needs " +
                          std::string(dtype_name(DType::f32)) + " " + meta.shape.str() + " on " +
                          Device::cpu().str());
    return &t;
  };
  // Moments are restored when any of this stage's are given; then all are needed (a
  // partial optimizer state would silently restart some moments from zero).
  bool with_opt = false;
  for (const FlatLayout::Entry& meta : entries())
    with_opt = with_opt || by_name.count(opt_m_name(meta.name)) > 0 ||
               by_name.count(opt_v_name(meta.name)) > 0;
  std::vector<Found> found(entries().size());
  for (std::size_t i = 0; i < entries().size(); ++i) {
    found[i].value = find(entries()[i].name, entries()[i]);
    if (with_opt) {
      found[i].m = find(opt_m_name(entries()[i].name), entries()[i]);
      found[i].v = find(opt_v_name(entries()[i].name), entries()[i]);
    }
  }
  return found;
}

ParamStore::HostFlat ParamStore::queue_upload(const std::vector<Found>& found,
                                              const Tensor* Found::*pick, DeviceBuffer& flat,
                                              bool is_f32) const {
  const auto n = static_cast<std::size_t>(total_);
  HostFlat host;  // padding zero: AdamW keeps it zero only if it starts zero
  if (is_f32)
    host.f32.assign(n, 0.0f);
  else
    host.bf16.assign(n, 0);
  for (std::size_t i = 0; i < entries().size(); ++i) {
    const float* src = (found[i].*pick)->f32();
    const auto off = static_cast<std::size_t>(entries()[i].offset);
    const auto count = static_cast<std::size_t>(entries()[i].numel);
    if (is_f32)
      std::memcpy(host.f32.data() + off, src, count * sizeof(float));
    else
      for (std::size_t k = 0; k < count; ++k) host.bf16[off + k] = float_to_bf16_bits(src[k]);
  }
  if (n > 0) {
    const void* src = is_f32 ? static_cast<const void*>(host.f32.data())
                             : static_cast<const void*>(host.bf16.data());
    CUDA_CHECK(cudaMemcpyAsync(flat.data(), src, n * (is_f32 ? sizeof(float) : sizeof(bf16)),
                               cudaMemcpyHostToDevice, stream_));
  }
  return host;  // moved: the vectors' storage (what the copy reads) stays where it is
}

// ---- snapshots in pinned host memory

void ParamStore::ensure_snapshot_stream() const {
  if (snap_stream_) return;
  CUDA_CHECK(cudaStreamCreateWithFlags(&snap_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&state_ready_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&snapshot_copied_, cudaEventDisableTiming));
}

std::shared_ptr<Storage> ParamStore::free_block() const {
  for (const auto& b : pinned_blocks_)
    if (b.use_count() == 1) return b;  // no snapshot holds it; its last copy ran before ours
  pinned_blocks_.push_back(allocate_pinned(layout_->buffer_bytes()));
  return pinned_blocks_.back();
}

void ParamStore::wait_for_snapshot_copies() {
  if (!copies_pending_) return;
  CUDA_CHECK(cudaStreamWaitEvent(stream_, snapshot_copied_, 0));
  copies_pending_ = false;
}

std::shared_ptr<const StateSnapshot> ParamStore::snapshot() const {
  ensure_snapshot_stream();
  const bool with_opt = steps_ > 0;  // as capture_state: moments once AdamW has run
  const std::size_t bytes = layout_->buffer_bytes();
  // The copies start after everything queued on the compute stream so far (the step).
  CUDA_CHECK(cudaEventRecord(state_ready_, stream_));
  CUDA_CHECK(cudaStreamWaitEvent(snap_stream_, state_ready_, 0));
  // One device-to-host copy engine serves every stream: a copy the compute stream needs
  // during the next step queues behind these (the loss is read without one for that
  // reason, cuda_stage_model.cpp).
  auto copy = [&](const DeviceBuffer& from) {
    auto block = free_block();
    if (bytes > 0)
      CUDA_CHECK(cudaMemcpyAsync(block->data(), from.data(), bytes, cudaMemcpyDeviceToHost, snap_stream_));
    return block;
  };
  auto values = copy(param_state_buffer());
  std::shared_ptr<Storage> m, v;
  if (with_opt) {
    m = copy(m_);
    v = copy(v_);
  }
  cudaEvent_t done = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(done, snap_stream_));
  CUDA_CHECK(cudaEventRecord(snapshot_copied_, snap_stream_));
  copies_pending_ = true;
  return std::make_shared<CudaStateSnapshot>(layout_, std::move(values), std::move(m),
                                             std::move(v), steps_, device_, done);
}

void ParamStore::restore_snapshot(const StateSnapshot& snapshot) {
  const auto* mine = dynamic_cast<const CudaStateSnapshot*>(&snapshot);
  if (!mine || !mine->layout().same_as(*layout_)) {
    restore_state(snapshot.tensors(), snapshot.optimizer_steps());
    return;
  }
  mine->wait();
  wait_for_snapshot_copies();
  const std::size_t bytes = layout_->buffer_bytes();
  auto upload = [&](DeviceBuffer& to, const void* from) {
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(to.data(), from, bytes, cudaMemcpyHostToDevice, stream_));
  };
  upload(master_fp32_ ? master_ : values_, mine->values());
  if (mine->has_moments()) {
    upload(m_, mine->m());
    upload(v_, mine->v());
  }
  finish_restore(mine->has_moments(), snapshot.optimizer_steps());
}

// ---- host images of flat buffers

void ParamStore::queue_download(const DeviceBuffer& flat, bool is_f32, HostFlat& host) const {
  const auto n = static_cast<std::size_t>(total_);
  if (n == 0) return;
  void* dst = nullptr;
  std::size_t bytes = 0;
  if (is_f32) {
    host.f32.resize(n);
    dst = host.f32.data();
    bytes = n * sizeof(float);
  } else {
    host.bf16.resize(n);
    dst = host.bf16.data();
    bytes = n * sizeof(bf16);
  }
  CUDA_CHECK(cudaMemcpyAsync(dst, flat.data(), bytes, cudaMemcpyDeviceToHost, stream_));
}

Tensor ParamStore::piece(const HostFlat& host, const FlatLayout::Entry& e) {
  const bool f32 = !host.f32.empty();
  const void* block = f32 ? static_cast<const void*>(host.f32.data()) : host.bf16.data();
  return flat_piece(block, f32, e);
}

std::vector<NamedTensor> ParamStore::download_params(const DeviceBuffer& flat, bool is_f32) const {
  HostFlat host;
  queue_download(flat, is_f32, host);
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<NamedTensor> out;
  out.reserve(entries().size());
  for (const FlatLayout::Entry& m : entries()) out.push_back(NamedTensor{m.name, piece(host, m)});
  return out;
}

void ParamStore::queue_zero(DeviceBuffer& flat) const {
  if (flat.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(flat.data(), 0, flat.bytes(), stream_));
}

std::size_t ParamStore::bytes() const {
  return master_.bytes() + values_.bytes() + grads_.bytes() + m_.bytes() + v_.bytes();
}

}  // namespace conveyor
