#pragma once
// The measurements behind `conveyor bench p2p`, one file per kind of transport
// (p2p_bench_ucx.cpp, p2p_bench_gpu.cpp). Each measures the channel and its raw
// reference alternately, `repeats` rounds, and keeps the best round of each: the machine
// is shared, and the best round is the one least disturbed by others.
#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::p2p {

struct Figures {
  double us = 0;       // per message: queued back to back (GPU), one way of a ping-pong (UCX)
  double sync_us = 0;  // one message alone, send to arrival seen by the receiver (GPU only)
};

struct Row {
  std::string transport;
  std::size_t bytes = 0;
  int iterations = 0;
  Figures channel;
  Figures raw;
};

struct Plan {
  std::vector<std::size_t> sizes;
  int iterations = 0;  // 0: by size
  int repeats = 3;
};

/// Iterations for one size when the plan leaves it to us.
int gpu_iterations(const Plan& plan, std::size_t bytes);
int ucx_iterations(const Plan& plan, std::size_t bytes);

/// CUDA devices visible to this process (0 in a build without CUDA).
int cuda_device_count();

std::vector<Row> bench_ucx(const Plan& plan);
/// REQUIRES: cuda_device_count() >= 2.
std::vector<Row> bench_nccl(const Plan& plan);
std::vector<Row> bench_cuda_peer(const Plan& plan);

/// The UCX transports the two workers use (UCX_TLS, or "UCX's choice").
std::string ucx_transports();

}  // namespace conveyor::p2p
