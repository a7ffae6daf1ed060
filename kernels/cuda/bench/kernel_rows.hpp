#pragma once
// What the kernel timings of every part share (kernel_timings.cpp, gpt2_block_kernels.cpp,
// llama_block_kernels.cpp): device buffers of fresh random values, and the table the rows
// go into, each row the median of repeated launches between two events on one stream.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/bench/kernel_timings.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor::kernel_bench {

/// A device buffer of `count` elements (bf16 or f32) filled from a chunk of random host
/// values (normal, stddev `scale`, never zero) repeated over its length.
class RandomBuffer {
 public:
  RandomBuffer(std::size_t count, bool bf16, float scale, std::uint64_t seed, int device,
               cudaStream_t stream);
  template <class T>
  T* as() const {
    return buffer_.as<T>();
  }

 private:
  DeviceBuffer buffer_;
};

class KernelRows {
 public:
  /// REQUIRES: `device` is current. Makes its own stream.
  KernelRows(int device, int repeats);
  ~KernelRows();
  KernelRows(const KernelRows&) = delete;
  KernelRows& operator=(const KernelRows&) = delete;

  cudaStream_t stream() const { return stream_; }
  RandomBuffer bf16(std::size_t count, float scale = 1.0f);
  RandomBuffer f32(std::size_t count, float scale = 1.0f);
  /// Token ids (or targets) uniform in [0, vocab).
  DeviceBuffer ids(std::size_t count, std::int64_t vocab);

  /// Times `launch` (see kernel_timings.hpp for the fields) and appends its row. Median of
  /// `repeats` single launches after 3 warm-ups, each after a spin on the stream that lets
  /// the host queue the launch while the device is busy: the device's time, as in training.
  void add(std::string name, std::string group, int per_step, double flops, double bytes,
           const std::function<void()>& launch, std::string master = "",
           std::string grad_dtype = "");

  std::vector<KernelTiming> take() { return std::move(rows_); }
  std::vector<KernelTiming>& rows() { return rows_; }

 private:
  double median_ms(const std::function<void()>& launch);

  int device_;
  int repeats_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::uint64_t seed_ = 1;
  std::vector<KernelTiming> rows_;
};

/// One block's kernels (per_step 1 per launch in one block; the caller multiplies by the
/// layers), B sequences of the model's T tokens.
void add_gpt2_block_kernels(KernelRows& k, const GptConfig& m, int B);
void add_llama_block_kernels(KernelRows& k, const GptConfig& m, int B);
/// The same block's linear layers in FP8 (precision.matmul fp8): counted in no step sum.
void add_fp8_linear_kernels(KernelRows& k, const GptConfig& m, int B);

}  // namespace conveyor::kernel_bench
