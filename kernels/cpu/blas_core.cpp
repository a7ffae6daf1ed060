#include "kernels/cpu/blas_core.hpp"

#include <cblas.h>

#include <cstdlib>
#include <mutex>

// OpenBLAS's builds for every core (DYNAMIC_ARCH, as Debian's) export these; they are not in
// its headers. quit forgets the kernel table, init picks one again (honouring
// OPENBLAS_CORETYPE). Weak: a BLAS without them keeps its own choice.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace conveyor {
namespace {

std::string& overridden_from() {
  static std::string detected;  // the core OpenBLAS chose, when ensure_blas_core replaced it
  return detected;
}

}  // namespace

std::string blas_core_override(std::string_view detected, CpuVectorUnits units, bool user_chose) {
  if (user_chose || detected != "Prescott") return "";
  if (units.avx512) return "SkylakeX";
  if (units.avx2_fma) return "Haswell";
  return "";
}

CpuVectorUnits cpu_vector_units() {
  CpuVectorUnits u;
  __builtin_cpu_init();
  u.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  u.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return u;
}

void ensure_blas_core() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
    const std::string detected = openblas_get_corename();
    const auto core =
        blas_core_override(detected, cpu_vector_units(), std::getenv("OPENBLAS_CORETYPE") != nullptr);
    if (core.empty()) return;
    ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    overridden_from() = detected;
  });
}

std::string blas_core() {
  ensure_blas_core();
  return openblas_get_corename();
}

std::string blas_core_replaced() {
  ensure_blas_core();
  return overridden_from();
}

std::string blas_description() {
  ensure_blas_core();
  std::string text = openblas_get_config();
  if (!overridden_from().empty())
    text += " (OpenBLAS chose " + overridden_from() + " for this CPU model; conveyor chose " +
            blas_core() + " by its vector units)";
  return text;
}

}  // namespace conveyor
