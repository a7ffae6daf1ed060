#pragma once
// Error checks for the CUDA runtime and cuBLAS(Lt). Every failed call throws
// conveyor::CudaError carrying the file, line, the call's text and the library's error
// string; nothing in conveyor aborts the process on a CUDA error (a stage actor that
// throws is restarted by its supervisor).
// Thread-safety: stateless; safe from any thread.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace conveyor {

class CudaError : public std::runtime_error {
 public:
  CudaError(const char* file, int line, std::string call, std::string error);
  /// For errors that are not a failed call (out of memory with context, a bad launch setup).
  explicit CudaError(const std::string& message);

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& call() const { return call_; }
  const std::string& error() const { return error_; }

 private:
  std::string file_;
  int line_ = 0;
  std::string call_;
  std::string error_;
};

namespace detail {
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
}  // namespace detail

}  // namespace conveyor

/// Throws conveyor::CudaError when `call` does not return cudaSuccess. The sticky-free
/// error state is cleared (cudaGetLastError) so a later check does not see it again.
#define CUDA_CHECK(call)                                                            \
  do {                                                                              \
    const cudaError_t conveyor_status_ = (call);                                    \
    if (conveyor_status_ != cudaSuccess)                                            \
      ::conveyor::detail::throw_cuda_error(conveyor_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Throws conveyor::CudaError when `call` does not return CUBLAS_STATUS_SUCCESS.
#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    const cublasStatus_t conveyor_status_ = (call);                                   \
    if (conveyor_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::conveyor::detail::throw_cublas_error(conveyor_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// After a kernel launch: a bad configuration surfaces here, not at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
