// cuBLASLt GEMMs for the linear layers, and the bias-gradient reduction.
//
// Row-major (N, X) data is column-major (X, N) to cuBLAS, so every call below is written
// in column-major terms:
//   forward          D (OC, N) = W^T-op (A = weight as (IC, OC), transa) * inp (IC, N)
//   backward_input   D (IC, N) = weight (IC, OC) * dout (OC, N)
//   backward_weight  D (IC, OC) += inp (IC, N) * dout^T (transb on (OC, N)), D f32 or bf16
// Algorithm choice is pinned: see gemm.hpp; the cuBLASLt calls themselves are
// lt_matmul.hpp's.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/lt_matmul.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kBiasChunkRows = 32;  // rows per partial sum of the bias gradient (fixed)
constexpr int kColumnThreads = 256;     // threads per block of the scalar partial sums
constexpr int kVecColumnThreads = 128;  // of the vectorised ones (1024 columns per block)

// ----------------------------------------------------------------------------
// kernels

// Pass 1: grid (ceil(OC / threads), chunks); partial (chunks, OC).
__global__ void bias_grad_partial_kernel(float* partial, const bf16* dout, int N, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= OC) return;
  const int begin = chunk * kBiasChunkRows, end = min(N, begin + kBiasChunkRows);
  float sum = 0.0f;
  for (int n = begin; n < end; ++n) sum += to_float(dout[std::int64_t{n} * OC + c]);
  partial[std::int64_t{chunk} * OC + c] = sum;
}

// Pass 1 for OC a multiple of 8 (16-byte aligned rows): the same sums, eight columns per
// thread with 16-byte loads (each column's partial gets the same bits as above).
__global__ void bias_grad_partial_vec_kernel(float* partial, const bf16* dout, int N, int OC) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kVec;
  const int chunk = blockIdx.y;
  if (c >= OC) return;
  const int begin = chunk * kBiasChunkRows, end = min(N, begin + kBiasChunkRows);
  float sum[kVec] = {};
#pragma unroll 4
  for (int n = begin; n < end; ++n) {
    float x[kVec];
    load8(x, dout + std::int64_t{n} * OC + c);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum[k] += x[k];
  }
  float* p = partial + std::int64_t{chunk} * OC + c;
#pragma unroll
  for (int k = 0; k < kVec; k += 4)
    *reinterpret_cast<float4*>(p + k) = make_float4(sum[k], sum[k + 1], sum[k + 2], sum[k + 3]);
}

// ----------------------------------------------------------------------------
// cuBLASLt plumbing

std::atomic<bool> g_gelu_fusion{true};

void check_dims(const char* what, int N, int IC, int OC) {
  require(N > 0 && IC > 0 && OC > 0, what,
          "N, IC, OC must be positive, got " + std::to_string(N) + ", " + std::to_string(IC) +
              ", " + std::to_string(OC));
  require(IC % 8 == 0 && OC % 8 == 0, what,
          "IC and OC must be multiples of 8, got " + std::to_string(IC) + ", " +
              std::to_string(OC));
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void set_gemm_gelu_fusion(bool fuse) { g_gelu_fusion = fuse; }
bool gemm_gelu_fusion() { return g_gelu_fusion; }

void linear_forward(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* weight,
                    const bf16* bias, int N, int IC, int OC, cudaStream_t stream) {
  check_dims("linear_forward", N, IC, OC);
  const bool fuse = pre_gelu && g_gelu_fusion;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (fuse)
    epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  else if (bias)
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  // Unfused GELU: the GEMM writes the pre-activation, then a separate kernel applies GELU.
  bf16* gemm_out = (pre_gelu && !fuse) ? pre_gelu : out;
  lt_matmul({.m = OC, .n = N, .k = IC, .transa = true, .transb = false, .A = weight, .lda = IC,
             .B = inp, .ldb = IC, .D = gemm_out, .ldd = OC, .d_type = CUDA_R_16BF,
             .accumulate = false, .epilogue = epilogue, .bias = bias,
             .aux = fuse ? pre_gelu : nullptr, .what = "linear_forward"},
            stream);
  if (pre_gelu && !fuse) gelu_forward(out, pre_gelu, std::int64_t{N} * OC, stream);
}

void linear_backward_input(bf16* dinp, const bf16* dout, const bf16* weight, const bf16* pre_gelu,
                           int N, int IC, int OC, cudaStream_t stream) {
  check_dims("linear_backward_input", N, IC, OC);
  const bool fuse = pre_gelu && g_gelu_fusion;
  lt_matmul({.m = IC, .n = N, .k = OC, .transa = false, .transb = false, .A = weight, .lda = IC,
             .B = dout, .ldb = OC, .D = dinp, .ldd = IC, .d_type = CUDA_R_16BF,
             .accumulate = false,
             .epilogue = fuse ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT,
             .aux = fuse ? pre_gelu : nullptr, .what = "linear_backward_input"},
            stream);
  if (pre_gelu && !fuse) gelu_backward_input(dinp, dinp, pre_gelu, std::int64_t{N} * IC, stream);
}

namespace {

// dbias += the column sums of dout: fixed chunks of rows summed in fp32, then the chunks
// added in order (no atomics), so the bits do not depend on the launch.
template <class G>
void bias_backward(G* dbias, const bf16* dout, int N, int OC, cudaStream_t stream) {
  const int chunks = static_cast<int>(ceil_div(N, kBiasChunkRows));
  require(chunks <= 65535, "linear_backward_bias", "N too large: " + std::to_string(N));
  DeviceBuffer partial(sizeof(float) * std::size_t(chunks) * OC, current_device(), stream,
                       "bias gradient partial sums");
  if (aligned16(dout))  // OC % 8 == 0: check_dims
    bias_grad_partial_vec_kernel<<<dim3(ceil_div(OC, kVec * kVecColumnThreads), chunks),
                                   kVecColumnThreads, 0, stream>>>(partial.as<float>(), dout, N,
                                                                   OC);
  else
    bias_grad_partial_kernel<<<dim3(ceil_div(OC, kColumnThreads), chunks), kColumnThreads, 0,
                               stream>>>(partial.as<float>(), dout, N, OC);
  CUDA_CHECK_LAUNCH();
  add_column_partials(dbias, dbias, OC, partial.as<float>(), chunks, OC, stream);
}

// G: float (D type CUDA_R_32F) or bf16 (CUDA_R_16BF: cuBLASLt reads C in bf16, computes
// alpha AB + C in fp32 and rounds D once; the algorithm is pinned per D type, GemmKey).
template <class G>
void backward_weight(G* dweight, G* dbias, const bf16* dout, const bf16* inp, int N, int IC,
                     int OC, cudaStream_t stream) {
  constexpr bool kF32 = std::is_same_v<G, float>;
  check_dims("linear_backward_weight", N, IC, OC);
  const cudaDataType_t d_type = kF32 ? CUDA_R_32F : CUDA_R_16BF;
  lt_matmul({.m = IC, .n = OC, .k = N, .transa = false, .transb = true, .A = inp, .lda = IC,
             .B = dout, .ldb = OC, .D = dweight, .ldd = IC, .d_type = d_type, .accumulate = true,
             .what = "linear_backward_weight"},
            stream);
  if (dbias) linear_backward_bias(dbias, dout, N, OC, stream);
}

}  // namespace

void linear_backward_bias(float* dbias, const bf16* dout, int N, int OC, cudaStream_t stream) {
  bias_backward(dbias, dout, N, OC, stream);
}

void linear_backward_bias(bf16* dbias, const bf16* dout, int N, int OC, cudaStream_t stream) {
  bias_backward(dbias, dout, N, OC, stream);
}

void linear_backward_weight(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                            int N, int IC, int OC, cudaStream_t stream) {
  backward_weight(dweight, dbias, dout, inp, N, IC, OC, stream);
}

void linear_backward_weight(bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                            int N, int IC, int OC, cudaStream_t stream) {
  backward_weight(dweight, dbias, dout, inp, N, IC, OC, stream);
}

}  // namespace conveyor
