#pragma once
// Helpers for the NCCL channel tests: two GPUs of this process stand for two processes
// (one thread per rank, each with its own communicator rank), the unique id travels
// through a real rendezvous server on loopback, and tensors are filled with random bits
// (never zeros) so that a transfer that moved nothing, or the wrong bytes, shows.
// Every TEST_CASE starts with CONVEYOR_REQUIRE_TWO_GPUS(): on a machine without two GPUs
// it prints why and returns (doctest has no skip).
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include "tests/support/cuda_devices.hpp"

#include <cstdint>
#include <cstring>
#include <exception>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "tests/transport/rendezvous/test_server.hpp"

namespace conveyor::nccl_testing {

inline int gpu_count() { return testing::cuda_device_count(); }

#define CONVEYOR_REQUIRE_TWO_GPUS()                                   \
  do {                                                                \
    const int conveyor_gpus_ = ::conveyor::nccl_testing::gpu_count(); \
    if (conveyor_gpus_ == 0) {                                        \
      MESSAGE("skipped: no GPU");                                     \
      return;                                                         \
    }                                                                 \
    if (conveyor_gpus_ < 2) {                                         \
      MESSAGE("skipped: needs 2 GPUs, found 1");                      \
      return;                                                         \
    }                                                                 \
  } while (0)

/// Random bytes for a tensor of `bytes` bytes: every 16-bit word non-zero, so neither a
/// bf16 nor an fp32 element is ever zero.
inline std::vector<std::uint8_t> random_bits(std::size_t bytes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> word(1, 0xffff);
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i + 1 < bytes; i += 2) {
    const std::uint32_t w = word(rng);
    out[i] = static_cast<std::uint8_t>(w);
    out[i + 1] = static_cast<std::uint8_t>(w >> 8);
  }
  return out;
}

/// A device tensor holding `bits`, with its ready event recorded on `stream`.
inline Tensor upload(const std::vector<std::uint8_t>& bits, const Shape& shape, DType dtype,
                     int device, cudaStream_t stream) {
  CUDA_CHECK(cudaSetDevice(device));
  Tensor t = empty_cuda(shape, dtype, device, stream, "nccl test upload");
  if (t.bytes() != bits.size()) throw std::logic_error("upload: size mismatch");
  CUDA_CHECK(cudaMemcpyAsync(t.raw(), bits.data(), bits.size(), cudaMemcpyHostToDevice, stream));
  record_ready(t, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));  // `bits` may go away
  return t;
}

/// The bytes of `t`, read on `stream` after its ready event (as a consumer would).
inline std::vector<std::uint8_t> download(const Tensor& t, cudaStream_t stream) {
  std::vector<std::uint8_t> out(t.bytes());
  wait_ready(t, stream);
  CUDA_CHECK(cudaMemcpyAsync(out.data(), t.raw(), out.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

/// A stream on `device`, owned by the test.
struct DeviceStream {
  int device;
  cudaStream_t s = nullptr;
  explicit DeviceStream(int d) : device(d) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ~DeviceStream() {
    (void)cudaSetDevice(device);
    (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  operator cudaStream_t() const { return s; }
};

/// Runs `a` and `b` on two threads (two ranks) and rethrows the first error.
template <class A, class B>
void run_ranks(A a, B b) {
  std::exception_ptr errors[2];
  std::thread t([&] {
    try {
      a();
    } catch (...) {
      errors[0] = std::current_exception();
    }
  });
  try {
    b();
  } catch (...) {
    errors[1] = std::current_exception();
  }
  t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace conveyor::nccl_testing
