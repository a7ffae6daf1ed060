#pragma once
// Which OpenBLAS kernels the CPU GEMMs run. OpenBLAS (Debian 12: 0.3.21, built for every
// x86 core) picks its kernels by CPU model when it loads; a model newer than its table —
// Emerald Rapids (family 6, model 207) on the machines here — falls back to the SSE3
// "Prescott" kernels: on 2 cores tiny.yaml then ran 1.6x slower than with the AVX-512
// ones (docs/PERFORMANCE.md). ensure_blas_core() selects by the vector units instead, once,
// before the first GEMM of the process, so every GEMM of a run uses one set of kernels.
// A user's OPENBLAS_CORETYPE always wins.
#include <string>
#include <string_view>

namespace conveyor {

struct CpuVectorUnits {
  bool avx512 = false;    // AVX-512 F, BW, DQ and VL, enabled by the OS
  bool avx2_fma = false;  // AVX2 and FMA, enabled by the OS
};

/// The OpenBLAS core to select in place of `detected`, or "" to keep it: "SkylakeX" (AVX-512)
/// or "Haswell" (AVX2) for the Prescott fallback only; nothing when the user chose a core.
std::string blas_core_override(std::string_view detected, CpuVectorUnits units, bool user_chose);

/// This CPU's vector units.
CpuVectorUnits cpu_vector_units();

/// Once per process (thread-safe; the first call should come before other threads start:
/// it sets OPENBLAS_CORETYPE, which processes started from this one then load with):
/// applies blas_core_override to OpenBLAS's own choice.
void ensure_blas_core();

/// The OpenBLAS core in use ("SkylakeX", …), after ensure_blas_core.
std::string blas_core();

/// The core OpenBLAS chose itself, when ensure_blas_core replaced it; else "".
std::string blas_core_replaced();

/// OpenBLAS's build and core ("OpenBLAS 0.3.21 … SkylakeX …"), and what was replaced, for
/// --version.
std::string blas_description();

}  // namespace conveyor
