// bench p2p, GPU 0 → GPU 1: the NCCL channel against raw ncclSend/ncclRecv, and the
// cuda-peer channel against raw cudaMemcpyPeerAsync. Each side of an NCCL edge runs on
// its own thread, as two stages would; a spin barrier starts both sides of every
// measurement together (a sleeping barrier would add its wake-up time to the latency).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

#include "apps/bench/p2p_bench_parts.hpp"

#if CONVEYOR_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_storage.hpp"
#include "transport/cuda/cuda_peer_channel.hpp"
#include "transport/nccl/nccl_channel.hpp"
#endif

namespace conveyor::p2p {

#if !CONVEYOR_WITH_CUDA

int cuda_device_count() { return 0; }
std::vector<Row> bench_nccl(const Plan&) { return {}; }
std::vector<Row> bench_cuda_peer(const Plan&) { return {}; }

#else

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSender = 0;    // GPU of the sending side
constexpr int kReceiver = 1;  // GPU of the receiving side
constexpr int kWarmup = 5;

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

class SpinBarrier {
 public:
  void arrive_and_wait() {
    const int phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == 1) {
      arrived_.store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
      return;
    }
    while (phase_.load(std::memory_order_acquire) == phase) {
    }
  }

 private:
  std::atomic<int> arrived_{0};
  std::atomic<int> phase_{0};
};

// Runs the two sides on two threads and rethrows the first error.
template <class SendSide, class ReceiveSide>
void run_pair(SendSide send_side, ReceiveSide receive_side) {
  std::exception_ptr errors[2];
  std::thread sender([&] {
    try {
      send_side();
    } catch (...) {
      errors[0] = std::current_exception();
    }
  });
  try {
    receive_side();
  } catch (...) {
    errors[1] = std::current_exception();
  }
  sender.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

Tensor filled_tensor(std::size_t bytes, int device, cudaStream_t stream) {
  CUDA_CHECK(cudaSetDevice(device));
  Tensor t = empty_cuda(Shape{static_cast<std::int64_t>(bytes / 4)}, DType::f32, device, stream,
                        "bench p2p source");
  CUDA_CHECK(cudaMemsetAsync(t.raw(), 0x3c, bytes, stream));
  record_ready(t, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return t;
}

// ---- NCCL ----

// Both ranks of both edges: the channel's (its own communicator and streams) and
// the raw reference's (a plain blocking communicator, plain buffers and streams).
struct NcclBench {
  std::unique_ptr<NcclSendChannel> tx;
  std::unique_ptr<NcclRecvChannel> rx;
  ncclComm_t raw[2] = {nullptr, nullptr};
  cudaStream_t raw_stream[2] = {nullptr, nullptr};
  void* raw_buffer[2] = {nullptr, nullptr};
  cudaStream_t source_stream = nullptr;
  Tensor source;
  SpinBarrier barrier;

  NcclBench(std::size_t max_bytes) {
    const ncclUniqueId channel_id = NcclCommunicator::new_id();
    ncclUniqueId raw_id;
    NCCL_CHECK(ncclGetUniqueId(&raw_id));
    auto side = [&](int rank) {
      const int device = rank == 0 ? kSender : kReceiver;
      CUDA_CHECK(cudaSetDevice(device));
      NCCL_CHECK(ncclCommInitRank(&raw[rank], 2, raw_id, rank));
      CUDA_CHECK(cudaStreamCreateWithFlags(&raw_stream[rank], cudaStreamNonBlocking));
      CUDA_CHECK(cudaMalloc(&raw_buffer[rank], max_bytes));
      CUDA_CHECK(cudaMemset(raw_buffer[rank], 0x3c, max_bytes));
      const NcclEdge edge{.name = "bench p2p", .device = device,
                          .timeout = std::chrono::seconds(60)};
      if (rank == 0)
        tx = std::make_unique<NcclSendChannel>(channel_id, edge);
      else
        rx = std::make_unique<NcclRecvChannel>(channel_id, edge);
    };
    run_pair([&] { side(0); }, [&] { side(1); });
    CUDA_CHECK(cudaSetDevice(kSender));
    CUDA_CHECK(cudaStreamCreateWithFlags(&source_stream, cudaStreamNonBlocking));
  }
  ~NcclBench() {
    tx.reset();
    rx.reset();
    source = Tensor();
    for (int rank = 0; rank < 2; ++rank) {
      (void)cudaSetDevice(rank == 0 ? kSender : kReceiver);
      if (raw[rank]) (void)ncclCommDestroy(raw[rank]);
      if (raw_buffer[rank]) (void)cudaFree(raw_buffer[rank]);
      if (raw_stream[rank]) (void)cudaStreamDestroy(raw_stream[rank]);
    }
    if (source_stream) (void)cudaStreamDestroy(source_stream);
  }

  // Microseconds per message, `n` messages queued back to back, timed on the receiver.
  double channel_stream(std::size_t bytes, int n) {
    const Shape shape{static_cast<std::int64_t>(bytes / 4)};
    double us = 0;
    run_pair(
        [&] {
          barrier.arrive_and_wait();
          for (int i = 0; i < n; ++i) tx->send(source);
          tx->flush();
        },
        [&] {
          barrier.arrive_and_wait();
          const auto start = Clock::now();
          for (int i = 0; i < n; ++i) rx->receive(shape, DType::f32);
          rx->flush();
          us = us_since(start) / n;
        });
    return us;
  }
  double raw_stream_us(std::size_t bytes, int n) {
    double us = 0;
    run_pair(
        [&] {
          CUDA_CHECK(cudaSetDevice(kSender));
          barrier.arrive_and_wait();
          for (int i = 0; i < n; ++i)
            NCCL_CHECK(ncclSend(raw_buffer[0], bytes, ncclUint8, 1, raw[0], raw_stream[0]));
          CUDA_CHECK(cudaStreamSynchronize(raw_stream[0]));
        },
        [&] {
          CUDA_CHECK(cudaSetDevice(kReceiver));
          barrier.arrive_and_wait();
          const auto start = Clock::now();
          for (int i = 0; i < n; ++i)
            NCCL_CHECK(ncclRecv(raw_buffer[1], bytes, ncclUint8, 0, raw[1], raw_stream[1]));
          CUDA_CHECK(cudaStreamSynchronize(raw_stream[1]));
          us = us_since(start) / n;
        });
    return us;
  }
  // Mean microseconds from the sender's call to the receiver seeing the message, one
  // message at a time (the activation of one micro-batch waiting to be consumed).
  double channel_sync_us(std::size_t bytes, int n) {
    const Shape shape{static_cast<std::int64_t>(bytes / 4)};
    std::vector<Clock::time_point> sent(n), arrived(n);
    run_pair(
        [&] {
          for (int i = 0; i < n; ++i) {
            barrier.arrive_and_wait();
            sent[i] = Clock::now();
            tx->send(source);
            tx->flush();
          }
        },
        [&] {
          for (int i = 0; i < n; ++i) {
            barrier.arrive_and_wait();
            rx->receive(shape, DType::f32);
            rx->flush();
            arrived[i] = Clock::now();
          }
        });
    return mean_gap(sent, arrived);
  }
  double raw_sync_us(std::size_t bytes, int n) {
    std::vector<Clock::time_point> sent(n), arrived(n);
    run_pair(
        [&] {
          CUDA_CHECK(cudaSetDevice(kSender));
          for (int i = 0; i < n; ++i) {
            barrier.arrive_and_wait();
            sent[i] = Clock::now();
            NCCL_CHECK(ncclSend(raw_buffer[0], bytes, ncclUint8, 1, raw[0], raw_stream[0]));
            CUDA_CHECK(cudaStreamSynchronize(raw_stream[0]));
          }
        },
        [&] {
          CUDA_CHECK(cudaSetDevice(kReceiver));
          for (int i = 0; i < n; ++i) {
            barrier.arrive_and_wait();
            NCCL_CHECK(ncclRecv(raw_buffer[1], bytes, ncclUint8, 0, raw[1], raw_stream[1]));
            CUDA_CHECK(cudaStreamSynchronize(raw_stream[1]));
            arrived[i] = Clock::now();
          }
        });
    return mean_gap(sent, arrived);
  }

  static double mean_gap(const std::vector<Clock::time_point>& from,
                         const std::vector<Clock::time_point>& to) {
    double total = 0;
    for (std::size_t i = 0; i < from.size(); ++i)
      total += std::chrono::duration<double, std::micro>(to[i] - from[i]).count();
    return total / static_cast<double>(from.size());
  }
};

// ---- cuda-peer ----

struct PeerBench {
  std::unique_ptr<TensorChannel> channel = make_cuda_peer_channel(kReceiver);
  cudaStream_t source_stream = nullptr;  // on the sender: the raw copies run here
  cudaStream_t wait_stream = nullptr;    // on the receiver: the host waits for a copy here
  void* raw_destination = nullptr;
  Tensor source;

  explicit PeerBench(std::size_t max_bytes) {
    CUDA_CHECK(cudaSetDevice(kReceiver));
    CUDA_CHECK(cudaStreamCreateWithFlags(&wait_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&raw_destination, max_bytes));
    CUDA_CHECK(cudaSetDevice(kSender));
    CUDA_CHECK(cudaStreamCreateWithFlags(&source_stream, cudaStreamNonBlocking));
  }
  ~PeerBench() {
    channel.reset();
    source = Tensor();
    (void)cudaSetDevice(kReceiver);
    (void)cudaFree(raw_destination);
    (void)cudaStreamDestroy(wait_stream);
    (void)cudaSetDevice(kSender);
    (void)cudaStreamDestroy(source_stream);
  }

  void wait_for(const Tensor& received) {
    CUDA_CHECK(cudaSetDevice(kReceiver));
    wait_ready(received, wait_stream);
    CUDA_CHECK(cudaStreamSynchronize(wait_stream));
  }
  double channel_stream_us(int n) {
    const auto start = Clock::now();
    Tensor last;
    for (int i = 0; i < n; ++i) last = channel->receive(source);
    wait_for(last);
    return us_since(start) / n;
  }
  double raw_stream_us(std::size_t bytes, int n) {
    CUDA_CHECK(cudaSetDevice(kSender));
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i)
      CUDA_CHECK(cudaMemcpyPeerAsync(raw_destination, kReceiver, source.raw(), kSender, bytes,
                                     source_stream));
    CUDA_CHECK(cudaStreamSynchronize(source_stream));
    return us_since(start) / n;
  }
  double channel_sync_us(int n) {
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const auto start = Clock::now();
      wait_for(channel->receive(source));
      total += us_since(start);
    }
    return total / n;
  }
  double raw_sync_us(std::size_t bytes, int n) {
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const auto start = Clock::now();
      CUDA_CHECK(cudaSetDevice(kSender));
      CUDA_CHECK(cudaMemcpyPeerAsync(raw_destination, kReceiver, source.raw(), kSender, bytes,
                                     source_stream));
      CUDA_CHECK(cudaStreamSynchronize(source_stream));
      total += us_since(start);
    }
    return total / n;
  }
};

Row best_of(const Plan& plan, const char* transport, std::size_t bytes, int n,
            const auto& measure_round) {
  Row row{.transport = transport, .bytes = bytes, .iterations = n, .channel = {}, .raw = {}};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  row.channel = row.raw = {kInf, kInf};
  for (int r = 0; r < plan.repeats; ++r) {
    const auto [channel, raw] = measure_round();
    row.channel.us = std::min(row.channel.us, channel.us);
    row.channel.sync_us = std::min(row.channel.sync_us, channel.sync_us);
    row.raw.us = std::min(row.raw.us, raw.us);
    row.raw.sync_us = std::min(row.raw.sync_us, raw.sync_us);
  }
  return row;
}

std::size_t largest(const Plan& plan) { return *std::max_element(plan.sizes.begin(), plan.sizes.end()); }

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: no GPU transport here
    return 0;
  }
  return n;
}

std::vector<Row> bench_nccl(const Plan& plan) {
  NcclBench bench(largest(plan));
  std::vector<Row> rows;
  for (const std::size_t bytes : plan.sizes) {
    bench.source = filled_tensor(bytes, kSender, bench.source_stream);
    const int n = gpu_iterations(plan, bytes);
    bench.raw_stream_us(bytes, kWarmup);
    bench.channel_stream(bytes, kWarmup);
    rows.push_back(best_of(plan, "nccl", bytes, n, [&] {
      Figures raw, channel;
      raw.us = bench.raw_stream_us(bytes, n);
      channel.us = bench.channel_stream(bytes, n);
      raw.sync_us = bench.raw_sync_us(bytes, n);
      channel.sync_us = bench.channel_sync_us(bytes, n);
      return std::pair{channel, raw};
    }));
  }
  return rows;
}

std::vector<Row> bench_cuda_peer(const Plan& plan) {
  PeerBench bench(largest(plan));
  std::vector<Row> rows;
  for (const std::size_t bytes : plan.sizes) {
    bench.source = filled_tensor(bytes, kSender, bench.source_stream);
    const int n = gpu_iterations(plan, bytes);
    bench.raw_stream_us(bytes, kWarmup);
    bench.channel_stream_us(kWarmup);
    rows.push_back(best_of(plan, "cuda-peer", bytes, n, [&] {
      Figures raw, channel;
      raw.us = bench.raw_stream_us(bytes, n);
      channel.us = bench.channel_stream_us(n);
      raw.sync_us = bench.raw_sync_us(bytes, n);
      channel.sync_us = bench.channel_sync_us(n);
      return std::pair{channel, raw};
    }));
  }
  return rows;
}

#endif  // CONVEYOR_WITH_CUDA

}  // namespace conveyor::p2p
