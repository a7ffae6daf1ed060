// Which OpenBLAS kernels the CPU GEMMs run: the Prescott fallback of a CPU model OpenBLAS
// does not know is replaced by the kernels its vector units allow, a user's choice never.
#include "kernels/cpu/blas_core.hpp"

#include <cstdlib>

#include <doctest/doctest.h>

using namespace conveyor;

TEST_CASE("the Prescott fallback gives way to the kernels of the CPU's vector units") {
  const CpuVectorUnits avx512{true, true}, avx2{false, true}, sse{false, false};
  CHECK(blas_core_override("Prescott", avx512, false) == "SkylakeX");
  CHECK(blas_core_override("Prescott", avx2, false) == "Haswell");
  CHECK(blas_core_override("Prescott", sse, false).empty());
  CHECK(blas_core_override("Prescott", avx512, /*user_chose=*/true).empty());
  CHECK(blas_core_override("SapphireRapids", avx512, false).empty());  // a core it knows
  CHECK(blas_core_override("Haswell", avx512, false).empty());
}

TEST_CASE("after ensure_blas_core the GEMMs run the kernels this CPU allows") {
  ensure_blas_core();
  const std::string core = blas_core();
  const std::string replaced = blas_core_replaced();
  INFO("core: " << core << ", replaced: " << replaced);
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  // Prescott remains only on a CPU without AVX2, or where the user asked for it.
  if (core == "Prescott" && !replaced.empty()) FAIL("replaced by Prescott");
  if (core == "Prescott" && chosen == nullptr) CHECK(!cpu_vector_units().avx2_fma);
  if (!replaced.empty()) {
    CHECK(replaced == "Prescott");
    REQUIRE(chosen != nullptr);  // exported to processes started from this one
    CHECK(std::string(chosen) == core);
  }
  CHECK(blas_description().find(core) != std::string::npos);
}
