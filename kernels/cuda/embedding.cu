// Embedding forward and weight backward. See embedding.hpp for the invariants.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/embedding.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

// ----------------------------------------------------------------------------
// kernels

// One thread per output element; consecutive threads walk C, so loads are coalesced.
__global__ void embedding_forward_kernel(bf16* out, const std::int32_t* tokens, const bf16* wte,
                                         const bf16* wpe, int T, int C, std::int64_t total) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i >= total) return;
  const std::int64_t bt = i / C;
  const int c = static_cast<int>(i % C);
  const int t = static_cast<int>(bt % T);
  const std::int64_t tok = tokens[bt];
  out[i] = wpe ? to_bf16(to_float(wte[tok * C + c]) + to_float(wpe[std::int64_t{t} * C + c]))
               : wte[tok * C + c];
}

// dwpe[t, c] += sum over b of dout[b, t, c], in b order. grid (ceil(C / threads), T).
// G: the gradients' type (float or bf16) here and in wte_backward_kernel.
template <class G>
__global__ void wpe_backward_kernel(G* dwpe, const bf16* dout, int B, int T, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (c >= C) return;
  float sum = 0.0f;
  for (int b = 0; b < B; ++b) sum += to_float(dout[(std::int64_t{b} * T + t) * C + c]);
  add_to_grad(dwpe + std::int64_t{t} * C + c, sum);
}

__global__ void iota_kernel(std::int32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

// grid (BT, ceil(C / threads)). Block x looks at sorted position i; only the first
// position of each run of equal tokens does work: it sums the run's rows (positions are
// ascending within a run because the sort is stable) and adds the sum to dwte once.
template <class G>
__global__ void wte_backward_kernel(G* dwte, const bf16* dout, const std::int32_t* sorted_tok,
                                    const std::int32_t* sorted_pos, int BT, int C) {
  const int i = blockIdx.x;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  const std::int32_t tok = sorted_tok[i];
  if (i > 0 && sorted_tok[i - 1] == tok) return;
  if (c >= C) return;
  float sum = 0.0f;
  for (int j = i; j < BT && sorted_tok[j] == tok; ++j)
    sum += to_float(dout[std::int64_t{sorted_pos[j]} * C + c]);
  add_to_grad(dwte + std::int64_t{tok} * C + c, sum);
}

int bits_for(int v) {  // bits needed to hold 0 .. v-1
  int bits = 1;
  while (bits < 31 && (1 << bits) < v) ++bits;
  return bits;
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void embedding_forward(bf16* out, const std::int32_t* tokens, const bf16* wte, const bf16* wpe,
                       int B, int T, int C, cudaStream_t stream) {
  require(B > 0 && T > 0 && C > 0, "embedding_forward",
          "B, T, C must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(C));
  const std::int64_t total = std::int64_t{B} * T * C;
  constexpr int kThreads = 256;
  embedding_forward_kernel<<<ceil_div(total, kThreads), kThreads, 0, stream>>>(out, tokens, wte,
                                                                               wpe, T, C, total);
  CUDA_CHECK_LAUNCH();
}

namespace {

template <class G>
void backward_weight(G* dwte, G* dwpe, const bf16* dout, const std::int32_t* tokens, int B,
                     int T, int C, int V, cudaStream_t stream) {
  require(B > 0 && T > 0 && C > 0 && V > 0, "embedding_backward_weight",
          "B, T, C, V must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(C) + ", " + std::to_string(V));
  constexpr int kThreads = 256;
  if (dwpe) {
    wpe_backward_kernel<G><<<dim3(ceil_div(C, kThreads), T), kThreads, 0, stream>>>(dwpe, dout,
                                                                                   B, T, C);
    CUDA_CHECK_LAUNCH();
  }

  const int BT = B * T;
  const int device = current_device();
  DeviceBuffer pos(sizeof(std::int32_t) * BT, device, stream, "embedding backward positions");
  DeviceBuffer sorted_tok(sizeof(std::int32_t) * BT, device, stream, "embedding backward keys");
  DeviceBuffer sorted_pos(sizeof(std::int32_t) * BT, device, stream, "embedding backward values");
  iota_kernel<<<ceil_div(BT, kThreads), kThreads, 0, stream>>>(pos.as<std::int32_t>(), BT);
  CUDA_CHECK_LAUNCH();
  const int end_bit = bits_for(V);
  std::size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens,
                                             sorted_tok.as<std::int32_t>(),
                                             pos.as<std::int32_t>(), sorted_pos.as<std::int32_t>(),
                                             BT, 0, end_bit, stream));
  DeviceBuffer temp(temp_bytes, device, stream, "embedding backward sort scratch");
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, tokens,
                                             sorted_tok.as<std::int32_t>(),
                                             pos.as<std::int32_t>(), sorted_pos.as<std::int32_t>(),
                                             BT, 0, end_bit, stream));
  wte_backward_kernel<G><<<dim3(BT, ceil_div(C, kThreads)), kThreads, 0, stream>>>(
      dwte, dout, sorted_tok.as<std::int32_t>(), sorted_pos.as<std::int32_t>(), BT, C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void embedding_backward_weight(float* dwte, float* dwpe, const bf16* dout,
                               const std::int32_t* tokens, int B, int T, int C, int V,
                               cudaStream_t stream) {
  backward_weight(dwte, dwpe, dout, tokens, B, T, C, V, stream);
}

void embedding_backward_weight(bf16* dwte, bf16* dwpe, const bf16* dout,
                               const std::int32_t* tokens, int B, int T, int C, int V,
                               cudaStream_t stream) {
  backward_weight(dwte, dwpe, dout, tokens, B, T, C, V, stream);
}

}  // namespace conveyor
