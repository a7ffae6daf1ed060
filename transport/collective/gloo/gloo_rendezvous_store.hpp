#pragma once
// The project's rendezvous store as Gloo's rendezvous store (gloo::rendezvous::Store), so
// that Gloo finds its peers' addresses through the store every process of the job already
// uses. Every key is stored under `prefix` (the stage group's, stage_group.hpp): Gloo names
// its keys by rank ("0", "1", ...), and several groups share one store.
//
// get() waits for its key, as Gloo's own stores do: Gloo reads a peer's key with get()
// alone (its "rank_<r>" keys, while connecting a full mesh), expecting it to block until
// the peer set it. Every wait is bounded: get() and wait(keys) without a timeout use
// `default_timeout`. Waits poll (store_polling.hpp), so the ranks of one process may share
// one client.
// Errors: CollectiveTimeout naming the keys still missing; RendezvousError from the client
// when the store is unreachable.
// Thread-safety: as the client's.
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "transport/rendezvous/client.hpp"

namespace conveyor {

class GlooRendezvousStore final : public gloo::rendezvous::Store {
 public:
  GlooRendezvousStore(RendezvousClient& client, std::string prefix,
                      std::chrono::milliseconds default_timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  const std::string& prefix() const { return prefix_; }

 private:
  RendezvousClient& client_;
  std::string prefix_;
  std::chrono::milliseconds default_timeout_;
};

}  // namespace conveyor
