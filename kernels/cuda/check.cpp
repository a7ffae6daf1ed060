#include "kernels/cuda/check.hpp"

#include "kernels/cuda/cublaslt_library.hpp"

namespace conveyor {

CudaError::CudaError(const char* file, int line, std::string call, std::string error)
    : std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                         " failed: " + error),
      file_(file),
      line_(line),
      call_(std::move(call)),
      error_(std::move(error)) {}

CudaError::CudaError(const std::string& message) : std::runtime_error(message), error_(message) {}

namespace detail {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next check starts clean
  throw CudaError(file, line, call,
                  std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  const CublasLtLibrary& lt = cublaslt();  // loaded: the failed call came from it
  throw CudaError(file, line, call,
                  std::string(lt.cublasLtGetStatusName(status)) + " (" +
                      lt.cublasLtGetStatusString(status) + ")");
}

}  // namespace detail
}  // namespace conveyor
