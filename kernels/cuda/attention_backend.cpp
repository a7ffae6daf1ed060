// The attention backend switch and its fallback (attention.hpp, attention_backend.hpp).
#include "kernels/cuda/attention_backend.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <tuple>

#include "kernels/cuda/attention.hpp"

namespace conveyor {
namespace {

std::atomic<AttentionBackend> g_backend{AttentionBackend::cudnn};

// Prints `reason` once per (pass, shape): a run calls the attention thousands of times
// with the same few shapes.
void warn_once(AttentionPass pass, int B, int T, int C, int NH, int NKV,
               const std::string& reason) {
  static std::mutex mu;
  static std::set<std::tuple<AttentionPass, int, int, int, int, int>> warned;
  {
    std::lock_guard lock(mu);
    if (!warned.emplace(pass, B, T, C, NH, NKV).second) return;
  }
  fmt::print(stderr,
             "conveyor: warning: cuDNN attention cannot run the {} pass at B={} T={} C={} NH={} "
             "NKV={} (head size {}); conveyor's attention kernels run it instead. Reason: {}\n",
             pass == AttentionPass::forward ? "forward" : "backward", B, T, C, NH, NKV, C / NH,
             reason);
}

}  // namespace

void set_attention_backend(AttentionBackend backend) { g_backend.store(backend); }

AttentionBackend attention_backend() { return g_backend.load(); }

namespace cuda_detail {

bool attention_on_cudnn(AttentionPass pass, int B, int T, int C, int NH, int NKV,
                        std::initializer_list<const void*> pointers) {
  if (attention_backend() != AttentionBackend::cudnn) return false;
  if (!aligned_for_cudnn(pointers)) {
    warn_once(pass, B, T, C, NH, NKV, "a pointer is not 16-byte aligned");
    return false;
  }
  if (const auto refusal = cudnn_attention_refusal(pass, B, T, C, NH, NKV)) {
    warn_once(pass, B, T, C, NH, NKV, *refusal);
    return false;
  }
  return true;
}

}  // namespace cuda_detail
}  // namespace conveyor
