// cuBLASLt GEMMs for the linear layers, and the bias-gradient reduction.
//
// Row-major (N, X) data is column-major (X, N) to cuBLAS, so every call below is written
// in column-major terms:
//   forward          D (OC, N) = W^T-op (A = weight as (IC, OC), transa) * inp (IC, N)
//   backward_input   D (IC, N) = weight (IC, OC) * dout (OC, N)
//   backward_weight  D (IC, OC) += inp (IC, N) * dout^T (transb on (OC, N)), D f32 or bf16
// Algorithm choice is pinned: see gemm.hpp. Handles, workspaces and chosen algorithms are
// process-wide, behind one mutex (descriptor setup and the heuristic query run on the
// host; the matmul itself is queued on the caller's stream).
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
#include "kernels/cuda/cublaslt_library.hpp"
#include "kernels/cuda/gelu.hpp"
#include "kernels/cuda/gemm.hpp"

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

int alignment_of(const void* p) {  // largest power of two <= 256 dividing the address
  if (!p) return 256;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int align = 1;
  while (align < 256 && (a % (2 * align)) == 0) align *= 2;
  return align;
}

struct GemmKey {
  int device;
  int m, n, k;
  int transa, transb;
  int lda, ldb, ldd;
  int epilogue;
  int d_type;
  int accumulate;
  int align_a, align_b, align_c, align_d, align_bias, align_aux;
  auto tie() const {
    return std::tie(device, m, n, k, transa, transb, lda, ldb, ldd, epilogue, d_type, accumulate,
                    align_a, align_b, align_c, align_d, align_bias, align_aux);
  }
  bool operator<(const GemmKey& o) const { return tie() < o.tie(); }
};

struct LtState {
  std::mutex mu;
  std::map<int, cublasLtHandle_t> handles;                         // per device
  std::map<std::pair<int, cudaStream_t>, void*> workspaces;        // per (device, stream)
  std::map<GemmKey, cublasLtMatmulAlgo_t> algos;                   // pinned choices
};

LtState& lt_state() {
  static auto* s = new LtState();  // leaked: used until process exit
  return *s;
}

// RAII for the per-call descriptors.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    const CublasLtLibrary& lt = cublaslt();
    if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
    if (d) lt.cublasLtMatrixLayoutDestroy(d);
    if (c) lt.cublasLtMatrixLayoutDestroy(c);
    if (b) lt.cublasLtMatrixLayoutDestroy(b);
    if (a) lt.cublasLtMatrixLayoutDestroy(a);
    if (op) lt.cublasLtMatmulDescDestroy(op);
  }
};

struct GemmCall {
  // column-major: D (m, n) = op(A) op(B) [+ beta C], C == D
  int m, n, k;
  bool transa, transb;
  const bf16* A;
  int lda;
  const bf16* B;
  int ldb;
  void* D;
  int ldd;
  cudaDataType_t d_type;     // CUDA_R_16BF or CUDA_R_32F
  bool accumulate;           // beta = 1
  cublasLtEpilogue_t epilogue;
  const bf16* bias;          // for *_BIAS epilogues
  const bf16* aux;           // GELU input: written by GELU_AUX*, read by DGELU
  const char* what;
};

void run_gemm(const GemmCall& g, cudaStream_t stream) {
  const int device = current_device();
  const CublasLtLibrary& lt = cublaslt();
  LtState& st = lt_state();
  std::lock_guard lock(st.mu);

  cublasLtHandle_t& handle = st.handles[device];
  if (!handle) CUBLAS_CHECK(lt.cublasLtCreate(&handle));
  void*& workspace = st.workspaces[{device, stream}];
  if (!workspace) CUDA_CHECK(cudaMalloc(&workspace, kGemmWorkspaceBytes));

  LtDescs ds;
  CUBLAS_CHECK(lt.cublasLtMatmulDescCreate(&ds.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(
      lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(
      lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue,
                                                 sizeof g.epilogue));
  if (g.bias) {
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &g.bias, sizeof g.bias));
    const cudaDataType_t bias_type = CUDA_R_16BF;
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                   &bias_type, sizeof bias_type));
  }
  if (g.aux) {
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                   &g.aux, sizeof g.aux));
    const std::int64_t aux_ld = g.ldd;
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                   &aux_ld, sizeof aux_ld));
    const std::int32_t aux_type = CUDA_R_16BF;
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(
        ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof aux_type));
  }
  // Layouts describe the stored matrices (before op).
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&ds.a, CUDA_R_16BF, g.transa ? g.k : g.m,
                                             g.transa ? g.m : g.k, g.lda));
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&ds.b, CUDA_R_16BF, g.transb ? g.n : g.k,
                                             g.transb ? g.k : g.n, g.ldb));
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&ds.c, g.d_type, g.m, g.n, g.ldd));
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&ds.d, g.d_type, g.m, g.n, g.ldd));

  const GemmKey key{device,
                    g.m,
                    g.n,
                    g.k,
                    g.transa,
                    g.transb,
                    g.lda,
                    g.ldb,
                    g.ldd,
                    static_cast<int>(g.epilogue),
                    static_cast<int>(g.d_type),
                    g.accumulate,
                    alignment_of(g.A),
                    alignment_of(g.B),
                    alignment_of(g.D),
                    alignment_of(g.D),
                    alignment_of(g.bias),
                    alignment_of(g.aux)};
  auto found = st.algos.find(key);
  if (found == st.algos.end()) {
    CUBLAS_CHECK(lt.cublasLtMatmulPreferenceCreate(&ds.pref));
    const std::uint64_t ws = kGemmWorkspaceBytes;
    CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    const std::uint32_t aligns[4] = {
        static_cast<std::uint32_t>(key.align_a), static_cast<std::uint32_t>(key.align_b),
        static_cast<std::uint32_t>(key.align_c), static_cast<std::uint32_t>(key.align_d)};
    const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(ds.pref, align_attrs[i], &aligns[i],
                                                           sizeof aligns[i]));
    // Split-K only with a separate reduction pass (no in-place reduction in the output).
    // A bf16 gradient (accumulated bf16 D) keeps its split-K partials in fp32 too: partials
    // rounded to bf16 before the reduction would lose what the fp32 compute type keeps.
    std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    const bool bf16_grad = g.accumulate && g.d_type == CUDA_R_16BF;
    if (!bf16_grad) schemes |= CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
        ds.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    CUBLAS_CHECK(lt.cublasLtMatmulAlgoGetHeuristic(handle, ds.op, ds.a, ds.b, ds.c, ds.d, ds.pref,
                                                   1, &result, &count));
    if (count == 0) {
      // Fall back to every reduction scheme rather than fail (still one fixed choice).
      schemes = CUBLASLT_REDUCTION_SCHEME_MASK;
      CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
          ds.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
      CUBLAS_CHECK(lt.cublasLtMatmulAlgoGetHeuristic(handle, ds.op, ds.a, ds.b, ds.c, ds.d, ds.pref,
                                                     1, &result, &count));
    }
    if (count == 0)
      throw CudaError(std::string(g.what) + ": cuBLASLt has no algorithm for m=" +
                      std::to_string(g.m) + " n=" + std::to_string(g.n) +
                      " k=" + std::to_string(g.k) + " epilogue=" + std::to_string(g.epilogue));
    found = st.algos.emplace(key, result.algo).first;
  }
  const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
  CUBLAS_CHECK(lt.cublasLtMatmul(handle, ds.op, &alpha, g.A, ds.a, g.B, ds.b, &beta, g.D, ds.c, g.D,
                                 ds.d, &found->second, workspace, kGemmWorkspaceBytes, stream));
}

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
  run_gemm({OC, N, IC, true, false, weight, IC, inp, IC, gemm_out, OC, CUDA_R_16BF, false,
            epilogue, bias, fuse ? pre_gelu : nullptr, "linear_forward"},
           stream);
  if (pre_gelu && !fuse) gelu_forward(out, pre_gelu, std::int64_t{N} * OC, stream);
}

void linear_backward_input(bf16* dinp, const bf16* dout, const bf16* weight, const bf16* pre_gelu,
                           int N, int IC, int OC, cudaStream_t stream) {
  check_dims("linear_backward_input", N, IC, OC);
  const bool fuse = pre_gelu && g_gelu_fusion;
  run_gemm({IC, N, OC, false, false, weight, IC, dout, OC, dinp, IC, CUDA_R_16BF, false,
            fuse ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, nullptr,
            fuse ? pre_gelu : nullptr, "linear_backward_input"},
           stream);
  if (pre_gelu && !fuse) gelu_backward_input(dinp, dinp, pre_gelu, std::int64_t{N} * IC, stream);
}

namespace {

// G: float (D type CUDA_R_32F) or bf16 (CUDA_R_16BF: cuBLASLt reads C in bf16, computes
// alpha AB + C in fp32 and rounds D once; the algorithm is pinned per D type, GemmKey).
template <class G>
void backward_weight(G* dweight, G* dbias, const bf16* dout, const bf16* inp, int N, int IC,
                     int OC, cudaStream_t stream) {
  constexpr bool kF32 = std::is_same_v<G, float>;
  check_dims("linear_backward_weight", N, IC, OC);
  const cudaDataType_t d_type = kF32 ? CUDA_R_32F : CUDA_R_16BF;
  run_gemm({IC, OC, N, false, true, inp, IC, dout, OC, dweight, IC, d_type, true,
            CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, "linear_backward_weight"},
           stream);
  if (!dbias) return;
  const int chunks = static_cast<int>(ceil_div(N, kBiasChunkRows));
  require(chunks <= 65535, "linear_backward_weight", "N too large: " + std::to_string(N));
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

}  // namespace

void linear_backward_weight(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                            int N, int IC, int OC, cudaStream_t stream) {
  backward_weight(dweight, dbias, dout, inp, N, IC, OC, stream);
}

void linear_backward_weight(bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                            int N, int IC, int OC, cudaStream_t stream) {
  backward_weight(dweight, dbias, dout, inp, N, IC, OC, stream);
}

}  // namespace conveyor
