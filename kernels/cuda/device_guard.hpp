#pragma once
// RAII: makes `device` current for this thread and restores the previous one on exit, so
// helpers that allocate or launch on a given device leave the caller's choice untouched.
#include <cuda_runtime_api.h>

#include "kernels/cuda/check.hpp"

namespace conveyor {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace conveyor
