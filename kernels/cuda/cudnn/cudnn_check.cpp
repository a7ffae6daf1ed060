#if CONVEYOR_WITH_CUDNN
#include "kernels/cuda/cudnn/cudnn_check.hpp"

#include <array>

namespace conveyor::detail {

std::string cudnn_last_error() {
  std::array<char, 4096> text{};
  cudnnGetLastErrorString(text.data(), text.size());  // returns nothing to check
  return std::string(text.data());
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  std::string error = std::string(cudnnGetErrorString(status)) + " (status " +
                      std::to_string(static_cast<int>(status)) + ")";
  const std::string last = cudnn_last_error();
  if (!last.empty()) error += "; cuDNN says: " + last;
  throw CudaError(file, line, call, error);
}

}  // namespace conveyor::detail
#endif  // CONVEYOR_WITH_CUDNN
