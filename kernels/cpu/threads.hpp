#pragma once
// How many threads the CPU kernels may use. The stage actors each own one core and call
// the kernels from their own thread, so the runtime calls set_cpu_kernel_threads(1) once at
// start: every GEMM then runs in the calling thread, and concurrent calls from several
// stage threads give bitwise the same results as serial calls.
// Thread-safety: process-wide setting; call it before any stage starts computing.

namespace conveyor {

/// Sets the number of threads OpenBLAS may use for one call. REQUIRES: threads >= 1.
/// Throws std::invalid_argument otherwise.
void set_cpu_kernel_threads(int threads);

/// The number of threads OpenBLAS uses now.
int cpu_kernel_threads();

}  // namespace conveyor
