#include "transport/cuda/cuda_peer_channel.hpp"

#include <cuda_runtime_api.h>

#include <deque>
#include <mutex>
#include <set>
#include <utility>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"

namespace conveyor {
namespace {

// Lets `device` read `peer`'s memory directly over NVLink/PCIe (once per pair).
void enable_peer_access(int device, int peer) {
  static std::mutex mu;
  static std::set<std::pair<int, int>> enabled;
  std::lock_guard<std::mutex> lock(mu);
  if (!enabled.insert({device, peer}).second) return;
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can) return;  // cudaMemcpyPeerAsync still works, staged by the driver
  DeviceGuard guard(device);
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return;
  }
  CUDA_CHECK(err);
}

class CudaPeerChannel final : public TensorChannel {
 public:
  explicit CudaPeerChannel(int device) : device_(device) {
    DeviceGuard guard(device_);
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  }
  ~CudaPeerChannel() override {
    DeviceGuard guard(device_);
    cudaStreamSynchronize(copy_stream_);  // in-flight copies still read their sources
    for (auto& f : in_flight_) cudaEventDestroy(f.done);
    in_flight_.clear();
    cudaStreamDestroy(copy_stream_);
  }
  CudaPeerChannel(const CudaPeerChannel&) = delete;
  CudaPeerChannel& operator=(const CudaPeerChannel&) = delete;

  Tensor receive(const Tensor& sent) override {
    const Device from = sent.device();
    if (from == Device::cuda(device_)) return sent;  // the consumer waits on its ready event
    if (from.is_cpu())
      throw std::invalid_argument("cuda-peer channel into cuda:" + std::to_string(device_) +
                                  " received a host tensor " + sent.describe());
    release_finished();
    enable_peer_access(device_, from.index);
    DeviceGuard guard(device_);
    Tensor copy = empty_cuda(sent.shape(), sent.dtype(), device_, copy_stream_, "cuda-peer receive");
    wait_ready(sent, copy_stream_);
    CUDA_CHECK(cudaMemcpyPeerAsync(copy.raw(), device_, sent.raw(), from.index, sent.bytes(),
                                   copy_stream_));
    record_ready(copy, copy_stream_);
    cudaEvent_t done = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(done, copy_stream_));
    in_flight_.push_back({sent, done});
    return copy;
  }

  std::string name() const override { return "cuda-peer"; }

 private:
  // Drops source handles whose copies have completed, oldest first.
  void release_finished() {
    while (!in_flight_.empty()) {
      const cudaError_t status = cudaEventQuery(in_flight_.front().done);
      if (status == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return;
      }
      CUDA_CHECK(status);
      cudaEventDestroy(in_flight_.front().done);
      in_flight_.pop_front();
    }
  }

  struct InFlight {
    Tensor source;
    cudaEvent_t done;
  };
  int device_;
  cudaStream_t copy_stream_ = nullptr;
  std::deque<InFlight> in_flight_;
};

}  // namespace

std::unique_ptr<TensorChannel> make_cuda_peer_channel(int device) {
  return std::make_unique<CudaPeerChannel>(device);
}

}  // namespace conveyor
