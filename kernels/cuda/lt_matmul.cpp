// cuBLASLt matmuls (lt_matmul.hpp): one call's descriptors, and the algorithm pinned per
// (device, shape, layout, types, epilogue, pointer alignment). Handles, workspaces and
// chosen algorithms are process-wide, behind one mutex (descriptor set-up and the
// heuristic query run on the host; the matmul itself is queued on the caller's stream).
#include "kernels/cuda/lt_matmul.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cublaslt_library.hpp"
#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/gemm.hpp"

namespace conveyor {
namespace {

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
  int a_type, b_type, d_type;
  int accumulate, scaled, fast_accum;
  int align_a, align_b, align_c, align_d, align_bias, align_aux;
  auto tie() const {
    return std::tie(device, m, n, k, transa, transb, lda, ldb, ldd, epilogue, a_type, b_type,
                    d_type, accumulate, scaled, fast_accum, align_a, align_b, align_c, align_d,
                    align_bias, align_aux);
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

}  // namespace

void lt_matmul(const LtMatmul& g, cudaStream_t stream) {
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
  if (g.a_scale)
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                   &g.a_scale, sizeof g.a_scale));
  if (g.b_scale)
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                   &g.b_scale, sizeof g.b_scale));
  if (g.fast_accum) {
    const std::int8_t on = 1;
    CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on,
                                                   sizeof on));
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
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&ds.a, g.a_type, g.transa ? g.k : g.m,
                                             g.transa ? g.m : g.k, g.lda));
  CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&ds.b, g.b_type, g.transb ? g.n : g.k,
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
                    static_cast<int>(g.a_type),
                    static_cast<int>(g.b_type),
                    static_cast<int>(g.d_type),
                    g.accumulate,
                    g.a_scale != nullptr || g.b_scale != nullptr,
                    g.fast_accum,
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
  const cublasStatus_t status =
      lt.cublasLtMatmul(handle, ds.op, &alpha, g.A, ds.a, g.B, ds.b, &beta, g.D, ds.c, g.D, ds.d,
                        &found->second, workspace, kGemmWorkspaceBytes, stream);
  // A refusal names the whole call: which of shape, types, pointers or scales it was is
  // otherwise invisible from the status alone (NOT_SUPPORTED covers them all).
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(g.what) + ": cublasLtMatmul returned " + std::to_string(status) +
                    " for m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                    " k=" + std::to_string(g.k) + " lda=" + std::to_string(g.lda) +
                    " ldb=" + std::to_string(g.ldb) + " ldd=" + std::to_string(g.ldd) +
                    " types(a,b,d)=" + std::to_string(g.a_type) + "," + std::to_string(g.b_type) +
                    "," + std::to_string(g.d_type) + " epilogue=" + std::to_string(g.epilogue) +
                    " accumulate=" + std::to_string(g.accumulate) +
                    " alignment(a,b,d,bias,a_scale,b_scale)=" + std::to_string(alignment_of(g.A)) +
                    "," + std::to_string(alignment_of(g.B)) + "," + std::to_string(alignment_of(g.D)) +
                    "," + std::to_string(alignment_of(g.bias)) + "," +
                    std::to_string(alignment_of(g.a_scale)) + "," +
                    std::to_string(alignment_of(g.b_scale)));
}


}  // namespace conveyor
