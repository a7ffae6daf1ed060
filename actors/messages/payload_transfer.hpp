#pragma once
// The bytes of a list of named tensors between two processes: a message that crossed CAF
// carries their names, shapes and dtypes (wire_format.hpp), the bytes go on the channel
// to or from the peer node, one transfer per tensor under a tag of its own. Used for the
// snapshot copies node 0 keeps of the other nodes' stages and hands back to a process
// that rejoined (snapshot_keeper.hpp).
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "transport/remote_channel.hpp"

namespace conveyor {

/// One "conveyor: ..." line on stderr: a transfer that failed in the background.
void log_transfer_error(const std::string& line);

/// Starts sending every tensor of `tensors`, the i-th under tag_of(i). A failed send is
/// reported once through `on_error` (a channel thread), with `what` and the tensor's name.
void send_payloads(RemoteChannel& channel, const std::vector<NamedTensor>& tensors,
                   const std::function<std::uint64_t(int)>& tag_of, std::chrono::milliseconds timeout,
                   std::string what,
                   std::function<void(const std::string&)> on_error = log_transfer_error);

/// Starts receiving the bytes of every PendingPayload in `tensors` (a tensor that holds
/// its bytes already is kept). `done` runs exactly once, on a channel thread: with the
/// filled list, or with the first failure (naming the tensor) and an empty list.
void receive_payloads(
    RemoteChannel& channel, std::vector<NamedTensor> tensors, std::chrono::milliseconds timeout,
    std::function<void(std::vector<NamedTensor>, std::exception_ptr)> done);

}  // namespace conveyor
