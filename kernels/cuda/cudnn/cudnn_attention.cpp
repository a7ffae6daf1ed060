#include "kernels/cuda/cudnn/cudnn_attention.hpp"

#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/check.hpp"

#if CONVEYOR_WITH_CUDNN
#include <compare>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/cudnn/cudnn_check.hpp"
#include "kernels/cuda/cudnn/sdpa_graphs.hpp"
#endif

namespace conveyor {
namespace {

std::optional<std::string> shape_error(int B, int T, int C, int NH, int NKV) {
  if (B > 0 && T > 0 && C > 0 && NH > 0 && NKV > 0 && C % NH == 0 && NH % NKV == 0)
    return std::nullopt;
  return "B, T, C, NH, NKV must be positive with NH dividing C and NKV dividing NH, got " +
         std::to_string(B) + ", " + std::to_string(T) + ", " + std::to_string(C) + ", " +
         std::to_string(NH) + ", " + std::to_string(NKV);
}

void check_args(const char* what, int B, int T, int C, int NH, int NKV,
                std::initializer_list<const void*> pointers) {
  if (auto err = shape_error(B, T, C, NH, NKV))
    throw std::invalid_argument(std::string(what) + ": " + *err);
  if (!aligned_for_cudnn(pointers))
    throw std::invalid_argument(std::string(what) +
                                ": every pointer must be 16-byte aligned (cuDNN's tensors "
                                "declare it)");
}

#if CONVEYOR_WITH_CUDNN

struct DeviceHandle {
  std::once_flag created;
  cudnnHandle_t handle = nullptr;
  std::string error;  // why cudnnCreate failed
  std::mutex mu;      // one thread at a time uses the handle
};

struct PlanKey {
  int device, B, T, C, NH, NKV;
  AttentionPass pass;
  auto operator<=>(const PlanKey&) const = default;
};

struct PlanSlot {
  std::once_flag built;
  DeviceHandle* device = nullptr;
  std::unique_ptr<cudnn::SdpaPlan> plan;  // null when refused
  std::string refusal;
};

// Never destroyed: a thread still running at exit must not meet a destroyed cache, and
// destroying handles after the CUDA runtime has shut down would fail.
struct Registry {
  std::mutex mu;  // guards the maps, not what they point to
  std::map<int, std::unique_ptr<DeviceHandle>> handles;
  std::map<PlanKey, std::unique_ptr<PlanSlot>> plans;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// The handle of `device`, created on first use. REQUIRES: `device` is current.
DeviceHandle& device_handle(int device) {
  Registry& r = registry();
  DeviceHandle* h = nullptr;
  {
    std::lock_guard lock(r.mu);
    auto& slot = r.handles[device];
    if (!slot) slot = std::make_unique<DeviceHandle>();
    h = slot.get();
  }
  std::call_once(h->created, [&] {
    try {
      CUDNN_CHECK(cudnnCreate(&h->handle));  // binds to the current device
    } catch (const CudaError& e) {
      h->handle = nullptr;
      h->error = e.what();
    }
  });
  return *h;
}

// The plan of (current device, shape, pass), built on first use.
const PlanSlot& plan_slot(AttentionPass pass, int B, int T, int C, int NH, int NKV) {
  const int device = current_device();
  Registry& r = registry();
  PlanSlot* slot = nullptr;
  {
    std::lock_guard lock(r.mu);
    auto& s = r.plans[PlanKey{device, B, T, C, NH, NKV, pass}];
    if (!s) s = std::make_unique<PlanSlot>();
    slot = s.get();
  }
  std::call_once(slot->built, [&] {
    DeviceHandle& h = device_handle(device);
    slot->device = &h;
    if (!h.handle) {
      slot->refusal = "no cuDNN handle on cuda:" + std::to_string(device) + ": " + h.error;
      return;
    }
    const cudnn::SdpaShape shape{B, NH, NKV, T, C / NH};
    std::lock_guard lock(h.mu);  // plan finalization uses the handle
    try {
      slot->plan = pass == AttentionPass::forward ? cudnn::build_sdpa_forward(h.handle, shape)
                                                  : cudnn::build_sdpa_backward(h.handle, shape);
    } catch (const CudaError& e) {
      slot->refusal = e.what();
    }
  });
  return *slot;
}

const PlanSlot& usable_plan(const char* what, AttentionPass pass, int B, int T, int C, int NH,
                            int NKV) {
  const PlanSlot& slot = plan_slot(pass, B, T, C, NH, NKV);
  if (!slot.plan)
    throw CudaError(std::string(what) + ": cuDNN cannot run this shape (B=" + std::to_string(B) +
                    " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                    " NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV) +
                    "): " + slot.refusal);
  return slot;
}

void execute(const PlanSlot& slot, std::span<const cudnn::TensorBinding> bindings,
             cudaStream_t stream) {
  DeviceBuffer workspace(static_cast<std::size_t>(slot.plan->plan.workspace_bytes),
                         current_device(), stream, "cuDNN attention workspace");
  const cudnn::BackendDescriptor pack = slot.plan->graph.variant_pack(bindings, workspace.data());
  std::lock_guard lock(slot.device->mu);
  CUDNN_CHECK(cudnnSetStream(slot.device->handle, stream));
  CUDNN_CHECK(cudnnBackendExecute(slot.device->handle, slot.plan->plan.plan.get(), pack.get()));
}  // the workspace returns to the stream's free list: later work on `stream` reuses it in order

#endif  // CONVEYOR_WITH_CUDNN

}  // namespace

bool aligned_for_cudnn(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

#if CONVEYOR_WITH_CUDNN

std::optional<std::string> cudnn_attention_refusal(AttentionPass pass, int B, int T, int C,
                                                   int NH, int NKV) {
  if (auto err = shape_error(B, T, C, NH, NKV)) return err;
  const PlanSlot& slot = plan_slot(pass, B, T, C, NH, NKV);
  if (slot.plan) return std::nullopt;
  return slot.refusal;
}

void cudnn_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                             int NKV, cudaStream_t stream) {
  check_args("cudnn_attention_forward", B, T, C, NH, NKV, {out, lse, qkv});
  const PlanSlot& slot =
      usable_plan("cudnn_attention_forward", AttentionPass::forward, B, T, C, NH, NKV);
  bf16* q = const_cast<bf16*>(qkv);  // cuDNN takes every pointer as void*; it only reads Q, K, V
  const std::int64_t kv_width = std::int64_t{NKV} * (C / NH);
  const cudnn::TensorBinding bindings[] = {{cudnn::kSdpaQ, q},
                                           {cudnn::kSdpaK, q + C},
                                           {cudnn::kSdpaV, q + C + kv_width},
                                           {cudnn::kSdpaO, out},
                                           {cudnn::kSdpaStats, lse}};
  execute(slot, bindings, stream);
}

void cudnn_attention_backward_input(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                                    const float* lse, int B, int T, int C, int NH, int NKV,
                                    cudaStream_t stream) {
  check_args("cudnn_attention_backward_input", B, T, C, NH, NKV, {dqkv, dout, qkv, out, lse});
  const PlanSlot& slot =
      usable_plan("cudnn_attention_backward_input", AttentionPass::backward, B, T, C, NH, NKV);
  const std::int64_t kv_width = std::int64_t{NKV} * (C / NH);
  DeviceBuffer softmax_sum(sizeof(float) * static_cast<std::size_t>(B) * NH * T, current_device(),
                           stream, "cuDNN attention backward softmax_sum");
  // cuDNN takes every pointer as void*; it only reads the inputs.
  bf16* q = const_cast<bf16*>(qkv);
  const cudnn::TensorBinding bindings[] = {{cudnn::kSdpaQ, q},
                                           {cudnn::kSdpaK, q + C},
                                           {cudnn::kSdpaV, q + C + kv_width},
                                           {cudnn::kSdpaO, const_cast<bf16*>(out)},
                                           {cudnn::kSdpaDout, const_cast<bf16*>(dout)},
                                           {cudnn::kSdpaStats, const_cast<float*>(lse)},
                                           {cudnn::kSdpaDq, dqkv},
                                           {cudnn::kSdpaDk, dqkv + C},
                                           {cudnn::kSdpaDv, dqkv + C + kv_width},
                                           {cudnn::kSdpaSoftmaxSum, softmax_sum.data()}};
  execute(slot, bindings, stream);
}

#else  // built without cuDNN: every shape is refused

namespace {
constexpr const char* kNoCudnn =
    "conveyor was built without cuDNN (CMake found no cuDNN 9 headers and library)";
}

std::optional<std::string> cudnn_attention_refusal(AttentionPass, int B, int T, int C, int NH,
                                                   int NKV) {
  if (auto err = shape_error(B, T, C, NH, NKV)) return err;
  return std::string(kNoCudnn);
}

void cudnn_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                             int NKV, cudaStream_t) {
  check_args("cudnn_attention_forward", B, T, C, NH, NKV, {out, lse, qkv});
  throw CudaError(std::string("cudnn_attention_forward: ") + kNoCudnn);
}

void cudnn_attention_backward_input(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                                    const float* lse, int B, int T, int C, int NH, int NKV,
                                    cudaStream_t) {
  check_args("cudnn_attention_backward_input", B, T, C, NH, NKV, {dqkv, dout, qkv, out, lse});
  throw CudaError(std::string("cudnn_attention_backward_input: ") + kNoCudnn);
}

#endif  // CONVEYOR_WITH_CUDNN

}  // namespace conveyor
