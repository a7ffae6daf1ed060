#pragma once
// Error checks for cuDNN. A failed call throws conveyor::CudaError (kernels/cuda/check.hpp)
// carrying the file, line, the call's text, cudnnGetErrorString's name of the status and
// cudnnGetLastErrorString's account of it (which check refused what: cuDNN's status alone
// rarely says).
// Thread-safety: stateless; cuDNN keeps its last error per thread.
#include <cudnn.h>

#include <string>

#include "kernels/cuda/check.hpp"

namespace conveyor::detail {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line);

/// cudnnGetLastErrorString of this thread, or "" when cuDNN has none.
std::string cudnn_last_error();

}  // namespace conveyor::detail

/// Throws conveyor::CudaError when `call` does not return CUDNN_STATUS_SUCCESS.
#define CUDNN_CHECK(call)                                                            \
  do {                                                                               \
    const cudnnStatus_t conveyor_status_ = (call);                                   \
    if (conveyor_status_ != CUDNN_STATUS_SUCCESS)                                    \
      ::conveyor::detail::throw_cudnn_error(conveyor_status_, #call, __FILE__, __LINE__); \
  } while (0)
