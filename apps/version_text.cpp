#include "apps/version_text.hpp"

#include <caf/config.hpp>
#include <fmt/format.h>

#include "kernels/cpu/blas_core.hpp"
#include "kernels/cpu/vector_math.hpp"

namespace conveyor {

std::string version_text() {
#if defined(CONVEYOR_WITH_CUDA)
#if CONVEYOR_WITH_CUDNN
  const char* cuda = "built (CUDA kernels, cuBLASLt, NCCL, cuDNN attention)";
#else
  const char* cuda = "built (CUDA kernels, cuBLASLt, NCCL; no cuDNN: runtime.attention kernels only)";
#endif
#else
  const char* cuda = "not built (no nvcc at configure time): CPU stages only";
#endif
  return fmt::format(
      "conveyor {}\nCUDA backend: {}\nCAF {}.{}.{}\nCPU GEMMs: {}\nCPU tanh and exp: glibc libmvec, {}",
      CONVEYOR_VERSION, cuda, CAF_VERSION / 10000, CAF_VERSION / 100 % 100, CAF_VERSION % 100,
      blas_description(), cpu::name(cpu::vector_math()));
}

}  // namespace conveyor
