#pragma once
// Helpers for the UCX tests: worker options for this sandbox, and tensors filled from
// the sender's rank so that a message from the wrong sender, a shifted copy or a buffer
// left at zero all show up as wrong elements.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/tensor/tensor.hpp"
#include "transport/ucx/ucx_worker.hpp"

namespace conveyor::ucx_test {

/// UCX_TLS for the tests: CONVEYOR_TEST_UCX_TLS when set, else "tcp,self,sm".
/// What UCX 1.13 does in this sandbox (Debian 12, one VM, no InfiniBand):
///   tcp,self,sm / sm / ""   → sysv shared memory for messages + cma for large ones
///   posix, sysv, tcp        → each works alone; cma alone cannot carry messages
///   detect_peer_failure     → TCP only: posix and sysv have no peer failure handler
///                             ("Destination is unreachable" from ucp_ep_create with sm)
inline std::string test_transports() {
  if (const char* tls = std::getenv("CONVEYOR_TEST_UCX_TLS")) return tls;
  return "tcp,self,sm";
}

inline UcxOptions test_options(const std::string& name,
                               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  UcxOptions o;
  o.transports = test_transports();
  o.timeout = timeout;
  o.name = name;
  return o;
}

/// Exact in f32 and i32, never zero, different for every rank.
inline std::int32_t pattern(int rank, std::int64_t i) {
  return (rank + 1) * 8192 + static_cast<std::int32_t>((i * 7919) % 4093);
}

inline Tensor filled(int rank, std::int64_t numel, DType dtype = DType::f32) {
  Tensor t = Tensor::zeros(Shape{numel}, dtype);
  if (dtype == DType::f32) {
    float* p = t.f32();
    for (std::int64_t i = 0; i < numel; ++i) p[i] = static_cast<float>(pattern(rank, i));
  } else {
    std::int32_t* p = t.i32();
    for (std::int64_t i = 0; i < numel; ++i) p[i] = pattern(rank, i);
  }
  return t;
}

/// How many elements differ from what `rank` sends.
inline std::int64_t wrong_elements(const Tensor& t, int rank) {
  std::int64_t wrong = 0;
  if (t.dtype() == DType::f32) {
    const float* p = t.f32();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      wrong += p[i] != static_cast<float>(pattern(rank, i));
  } else {
    const std::int32_t* p = t.i32();
    for (std::int64_t i = 0; i < t.numel(); ++i) wrong += p[i] != pattern(rank, i);
  }
  return wrong;
}

}  // namespace conveyor::ucx_test
