#pragma once
// Moving a tensor to or from a stage in another process (or host). One channel serves
// every pipeline edge between this process and one peer process; it is chosen per peer
// by the edges between the two (actors/cluster/channel_setup.hpp).
//
//   peer process, host memory     ucx          transport/ucx/ucx_channel.hpp
//   peer process, GPU stages      nccl + ucx   transport/nccl/nccl_remote_channel.hpp
//                                              (activations and gradients over NCCL,
//                                              the final weights over UCX)
//
// Both operations return at once; `done` runs exactly once, on a thread of the channel
// (not the caller's), with the tensor (a send: the one sent; a receive: a new tensor of
// the given shape and dtype) or with an exception (a timeout after `timeout`, a broken
// connection, a message of the wrong length). `done` must be quick and must not call back
// into the channel. The tag names the message (actors/messages/edge_tags.hpp); a receive
// matches the send with the same tag.
// Thread-safety: every member may be called from any thread.
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// What an operation fails with when a recovery rebuilt its edge under it (the round it
/// belonged to is void): not a failure of the stage that started it.
class ChannelReset : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// True when `e` holds a ChannelReset.
inline bool is_channel_reset(std::exception_ptr e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const ChannelReset&) {
    return true;
  } catch (...) {
  }
  return false;
}

class RemoteChannel {
 public:
  using Done = std::function<void(Tensor, std::exception_ptr)>;
  virtual ~RemoteChannel() = default;

  /// Starts sending `tensor` (kept alive until the transport is done with it).
  virtual void send(std::uint64_t tag, const Tensor& tensor, std::chrono::milliseconds timeout,
                    Done done) = 0;
  /// Starts receiving a tensor of this shape and dtype.
  virtual void receive(std::uint64_t tag, const Shape& shape, DType dtype,
                       std::chrono::milliseconds timeout, Done done) = 0;
  /// "ucx to node 1", for logs and errors.
  virtual std::string name() const = 0;
};

}  // namespace conveyor
