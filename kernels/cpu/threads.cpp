#include "kernels/cpu/threads.hpp"

#include <cblas.h>

#include "kernels/cpu/blas_core.hpp"

#include <stdexcept>
#include <string>

namespace conveyor {

void set_cpu_kernel_threads(int threads) {
  if (threads < 1)
    throw std::invalid_argument("set_cpu_kernel_threads: threads must be >= 1, got " +
                                std::to_string(threads));
  ensure_blas_core();  // before the stages' threads start: it sets a variable
  openblas_set_num_threads(threads);
}

int cpu_kernel_threads() { return openblas_get_num_threads(); }

}  // namespace conveyor
