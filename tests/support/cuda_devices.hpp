#pragma once
// How many CUDA devices this machine shows, for GPU tests that skip without them. Never
// throws: a machine without a driver has 0.
#include <cuda_runtime_api.h>

namespace conveyor::testing {

inline int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace conveyor::testing
