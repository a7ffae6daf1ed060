#pragma once
// cuBLASLt, opened on first use (dlopen) instead of linked: loading libcublasLt runs its
// static initialisers, about 0.4 s of CPU per process (measured 2026-12-01 on the 2-core
// dev machine: an empty program 0.00 s, linked with -lcublasLt 0.37-0.41 s). Linked, every
// `conveyor` command paid that, GPU or not — `--help`, a config check, each process of a
// CPU job, each test. Opened lazily, only the first GEMM on a GPU does.
//
// Each entry keeps the library's own name and type (decltype of its declaration), so a
// call reads `cublaslt().cublasLtMatmul(...)` and the compiler checks its arguments as for
// a direct call. What must hold: conveyor_kernels does not link CUDA::cublasLt (a leftover
// direct call fails to link, so none slips through).
// Thread-safety: cublaslt() loads once (a function-local static); the table is read-only.
#include <cublasLt.h>

namespace conveyor {

#define CONVEYOR_CUBLASLT_FUNCTIONS(X)      \
  X(cublasLtCreate)                         \
  X(cublasLtGetStatusName)                  \
  X(cublasLtGetStatusString)                \
  X(cublasLtMatmul)                         \
  X(cublasLtMatmulAlgoGetHeuristic)         \
  X(cublasLtMatmulDescCreate)               \
  X(cublasLtMatmulDescDestroy)              \
  X(cublasLtMatmulDescSetAttribute)         \
  X(cublasLtMatmulPreferenceCreate)         \
  X(cublasLtMatmulPreferenceDestroy)        \
  X(cublasLtMatmulPreferenceSetAttribute)   \
  X(cublasLtMatrixLayoutCreate)             \
  X(cublasLtMatrixLayoutDestroy)

struct CublasLtLibrary {
#define CONVEYOR_CUBLASLT_ENTRY(name) decltype(&::name) name = nullptr;
  CONVEYOR_CUBLASLT_FUNCTIONS(CONVEYOR_CUBLASLT_ENTRY)
#undef CONVEYOR_CUBLASLT_ENTRY
};

/// The loaded library; the first call opens it. Throws CudaError naming the library, the
/// places tried and dlerror()'s reason when it or one of its functions is missing.
const CublasLtLibrary& cublaslt();

}  // namespace conveyor
