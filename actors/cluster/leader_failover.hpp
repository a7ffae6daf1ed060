#pragma once
// Issue 44 item 7, increment 3: node k > 0's part in surviving the loss of the leader
// (node 0: the coordinator and the rendezvous store). The standby of the layout
// (actors/plan/leader_election.hpp) keeps a copy of the store: a follower server fed by a
// StoreMirror (transport/rendezvous/store_mirror.hpp), listening on this node's advertise
// host from the start, its address published in the primary store (peer_values.hpp's
// "standby"). Every other node reads that address while the leader lives, and its store
// clients share one StoreRoute (store_route.hpp), so that moving it re-points them all.
// Once the leader is lost every survivor elects its successor from its own record of the
// layout (`elect`): the successor promotes its copy of the store; the others move their
// route to it and check that they reach it. Taking over the coordinator is not
// implemented yet: fail_over() says whom the election chose, and the node ends.
//
// What must hold: the standby is derived again from every layout (on_layout): a node
// that stops standing by stops its mirror and server; the new standby starts its own and
// publishes it. The successor waits (at most `reach_timeout`) for the others to reach its
// store before it ends, so that their check does not find it gone.
// Thread-safety: on_layout runs on the directory's thread (a re-plan), refresh and
// fail_over on the node's main thread: every member locks. No CAF.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/cluster/peer_values.hpp"
#include "actors/plan/leader_election.hpp"
#include "transport/rendezvous/client.hpp"
#include "transport/rendezvous/server.hpp"
#include "transport/rendezvous/store_mirror.hpp"

namespace conveyor {

struct LeaderFailoverOptions {
  int node = -1;
  int leader = 0;
  /// Where this node's copy of the store listens, when it stands by.
  std::string advertise_host;
  /// This node's store clients' options; `store.route` is the route they share (set).
  RendezvousClientOptions store;
  /// Bounds the election's waits: a follower reaching the promoted store, the successor
  /// waiting for the followers to reach it.
  std::chrono::milliseconds reach_timeout{5000};
  /// Between two reads of the standby's address by refresh().
  std::chrono::milliseconds refresh_every{1000};
  /// The few log lines (standing by, stopping); default: stderr.
  std::function<void(std::string_view)> log;
};

class LeaderFailover {
 public:
  /// `primary`: this node's client of the leader's store, used to publish and read the
  /// standby's address. REQUIRES: options.store.route is set; `primary` outlives this.
  LeaderFailover(LeaderFailoverOptions options, RendezvousClient& primary);
  ~LeaderFailover();
  LeaderFailover(const LeaderFailover&) = delete;
  LeaderFailover& operator=(const LeaderFailover&) = delete;

  /// The layout over `nodes` (idle ones included), of re-plan `generation` (0: the one the
  /// job started with). The standby starts its copy of the store and publishes it; a node
  /// that no longer stands by stops its own. THROWS RendezvousError when the copy cannot
  /// listen or be published.
  void on_layout(const std::vector<int>& nodes, std::int64_t generation);
  /// Reads the standby's address from the leader's store (at most every refresh_every),
  /// so that it is known when the leader is lost. Never throws: a failed read is retried.
  void refresh();
  /// The election once the leader is lost, on this node's record of the layout.
  Election election();
  /// The leader was lost (`why`: how this node saw it): the election and this node's part
  /// in it. Returns the line the node ends with, `why` last in parentheses. `holdings`: what this
  /// node holds of the leader's stages (standby_role.hpp), empty when it keeps no copies.
  std::string fail_over(const std::string& why, const std::string& holdings);

 private:
  void stand_by(std::int64_t generation);  // REQUIRES: mu_ held
  void stop_standing_by(bool say);         // REQUIRES: mu_ held; `say`: log it
  std::string lead(const std::string& lost, const std::string& holdings);
  std::string follow(const std::string& lost, int successor);
  void log(std::string_view line) const;

  const LeaderFailoverOptions options_;
  RendezvousClient& primary_;
  std::mutex mu_;
  std::vector<int> nodes_;                 // the layout's, as this node knows it
  int standby_node_ = -1;                  // the layout's standby
  std::optional<StandbyAddress> standby_;  // its address, once read (or this node's own)
  std::chrono::steady_clock::time_point last_read_{};
  std::unique_ptr<RendezvousServer> copy_;  // this node's copy of the store, while it stands by
  std::unique_ptr<StoreMirror> mirror_;     // declared after copy_: stopped before it goes
};

}  // namespace conveyor
