#include "transport/nccl/nccl_channel.hpp"

#include <stdexcept>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device_guard.hpp"
#include "kernels/cuda/device_storage.hpp"

namespace conveyor {
namespace {

constexpr int kSenderRank = 0;
constexpr int kReceiverRank = 1;
// The first message of every edge, exchanged by the constructors: NCCL connects a pair on
// its first send/receive, and that blocks the host until the peer joins in. Doing it at
// setup (bounded, see nccl_communicator.hpp) keeps the first activation's send from
// blocking its stage, and proves the edge and its two ends before training starts.
constexpr std::int32_t kHello = 0x636f6e76;  // "conv"
const Shape kHelloShape{1};
const char* const kHelloWhat = "the edge's first message";

std::string describe(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + " " + shape.str();
}

}  // namespace

NcclSendChannel::NcclSendChannel(const ncclUniqueId& id, const NcclEdge& edge)
    : edge_(edge), side_(edge.device, [&](cudaStream_t stream) {
        Tensor hello = empty_cuda(kHelloShape, DType::i32, edge.device, stream, "nccl hello");
        CUDA_CHECK(cudaMemcpyAsync(hello.raw(), &kHello, sizeof kHello, cudaMemcpyHostToDevice,
                                   stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));  // setup only
        auto comm = std::make_unique<NcclCommunicator>(
            id, kSenderRank, edge.device, edge.name, edge.timeout, [hello, stream](ncclComm_t c) {
              NCCL_CHECK(ncclSend(hello.raw(), hello.bytes(), ncclUint8, kReceiverRank, c, stream));
            });
        hello_ = hello;
        return comm;
      }) {
  DeviceGuard guard(edge_.device);
  side_.enqueue(std::move(hello_), kHelloWhat);
  flush();
}

void NcclSendChannel::send(const Tensor& tensor) {
  if (!tensor.defined() || tensor.device() != Device::cuda(edge_.device))
    throw std::invalid_argument(side_.comm().describe() + ": send of " +
                                (tensor.defined() ? tensor.describe() : "an empty tensor") +
                                ": the edge sends from cuda:" + std::to_string(edge_.device));
  side_.poll();
  if (tensor.bytes() == 0) return;  // the receiver knows the shape: nothing to move
  DeviceGuard guard(edge_.device);
  wait_ready(tensor, side_.stream());
  NcclCommunicator& comm = side_.comm();
  NCCL_CHECK_COMM(comm, ncclSend(tensor.raw(), tensor.bytes(), ncclUint8, kReceiverRank,
                                 comm.get(), side_.stream()));
  side_.enqueue(tensor, "send of " + describe(tensor.dtype(), tensor.shape()));
}

NcclRecvChannel::NcclRecvChannel(const ncclUniqueId& id, const NcclEdge& edge)
    : edge_(edge), side_(edge.device, [&](cudaStream_t stream) {
        Tensor hello = empty_cuda(kHelloShape, DType::i32, edge.device, stream, "nccl hello");
        auto comm = std::make_unique<NcclCommunicator>(
            id, kReceiverRank, edge.device, edge.name, edge.timeout, [hello, stream](ncclComm_t c) mutable {
              NCCL_CHECK(ncclRecv(hello.raw(), hello.bytes(), ncclUint8,
                                  kSenderRank, c, stream));
            });
        hello_ = hello;
        return comm;
      }) {
  DeviceGuard guard(edge_.device);
  side_.enqueue(hello_, kHelloWhat);
  flush();
  std::int32_t value = 0;
  CUDA_CHECK(cudaMemcpyAsync(&value, hello_.raw(), sizeof value, cudaMemcpyDeviceToHost,
                             side_.stream()));
  CUDA_CHECK(cudaStreamSynchronize(side_.stream()));
  hello_ = Tensor();
  if (value != kHello)
    throw NcclError(side_.comm().describe() + ": the first message is not the sender's hello (" +
                    std::to_string(value) + "): is the peer another edge's end?");
}

Tensor NcclRecvChannel::receive(const Shape& shape, DType dtype) {
  side_.poll();
  DeviceGuard guard(edge_.device);
  Tensor tensor = empty_cuda(shape, dtype, edge_.device, side_.stream(), "nccl receive");
  if (tensor.bytes() == 0) return tensor;
  NcclCommunicator& comm = side_.comm();
  NCCL_CHECK_COMM(comm, ncclRecv(tensor.raw(), tensor.bytes(), ncclUint8, kSenderRank,
                                 comm.get(), side_.stream()));
  record_ready(tensor, side_.stream());
  side_.enqueue(tensor, "receive of " + describe(dtype, shape));
  return tensor;
}

}  // namespace conveyor
