#pragma once
// Waiting for keys of the rendezvous store by polling get(), never with the store's
// blocking wait: a RendezvousClient serves one request at a time, and the ranks of one
// process (stage actors of several replicas) may share it, so a blocking wait of one rank
// would keep its peer from setting the very key being waited for until the wait times out.
// Polls start every millisecond and slow down to every 20 ms (setup only, not per step).
// Thread-safety: as the client's (each call is one request).
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "transport/rendezvous/client.hpp"

namespace conveyor {

/// The values of `keys`, in order, once every key is set, or at `deadline` with nullopt for
/// the keys still missing (callers name them in their error).
std::vector<std::optional<rendezvous::Bytes>> poll_keys(
    RendezvousClient& store, const std::vector<std::string>& keys,
    std::chrono::steady_clock::time_point deadline);

}  // namespace conveyor
