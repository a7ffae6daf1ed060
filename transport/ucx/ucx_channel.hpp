#pragma once
// The RemoteChannel to one peer process over a UcxHub (host memory: shared memory on one
// host, TCP or RDMA across hosts, as UCX chooses within UCX_TLS). Many channels share a
// hub: one UCX worker per process, one endpoint per peer.
#include <memory>
#include <string>

#include "transport/remote_channel.hpp"
#include "transport/ucx/ucx_hub.hpp"

namespace conveyor {

class UcxChannel final : public RemoteChannel {
 public:
  /// REQUIRES: hub->connect(peer, ...) returned.
  UcxChannel(std::shared_ptr<UcxHub> hub, int peer, std::string peer_name)
      : hub_(std::move(hub)), peer_(peer), peer_name_(std::move(peer_name)) {}

  void send(std::uint64_t tag, const Tensor& tensor, std::chrono::milliseconds timeout,
            Done done) override {
    hub_->send(peer_, tag, tensor, timeout, std::move(done));
  }
  void receive(std::uint64_t tag, const Shape& shape, DType dtype,
               std::chrono::milliseconds timeout, Done done) override {
    hub_->receive(peer_, tag, shape, dtype, timeout, std::move(done));
  }
  std::string name() const override { return "ucx to " + peer_name_; }

 private:
  std::shared_ptr<UcxHub> hub_;
  int peer_;
  std::string peer_name_;
};

}  // namespace conveyor
