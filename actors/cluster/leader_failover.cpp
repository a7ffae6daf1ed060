#include "actors/cluster/leader_failover.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "transport/rendezvous/error.hpp"

namespace conveyor {
namespace {

// The successor's record in its promoted store: the term it leads (1: the first leader
// after node 0) and who leads. A follower reads it to learn that it reached the new store.
constexpr const char* kLeaderKey = "leader";
constexpr int kTerm = 1;

std::string follows_key(int node) { return fmt::format("follows/{}", node); }

// "node 0 was lost; node N was elected to lead (term 1)": how both the successor's and a
// follower's line begin.
std::string elected_line(const std::string& lost, int successor) {
  return fmt::format("{}; node {} was elected to lead (term {})", lost, successor, kTerm);
}

std::string not_implemented() {
  return "but taking over the coordinator is not implemented yet: the job ends";
}

}  // namespace

LeaderFailover::LeaderFailover(LeaderFailoverOptions options, RendezvousClient& primary)
    : options_(std::move(options)), primary_(primary) {
  if (!options_.store.route)
    throw std::logic_error("LeaderFailover: the store clients share no route");
}

LeaderFailover::~LeaderFailover() {
  std::lock_guard lock(mu_);
  stop_standing_by(/*say=*/false);  // the run ends: nothing to tell
}

void LeaderFailover::log(std::string_view line) const {
  if (options_.log)
    options_.log(line);
  else
    fmt::print(stderr, "conveyor train: {}\n", line);
}

void LeaderFailover::on_layout(const std::vector<int>& nodes, std::int64_t generation) {
  std::lock_guard lock(mu_);
  nodes_ = nodes;
  const int standby = standby_of(nodes, options_.leader);
  if (standby != standby_node_) standby_.reset();  // another node's address: read afresh
  standby_node_ = standby;
  if (standby == options_.node)
    stand_by(generation);
  else
    stop_standing_by(/*say=*/true);
}

void LeaderFailover::stand_by(std::int64_t generation) {
  if (!copy_) {
    RendezvousServerOptions server;
    server.host = options_.advertise_host;
    server.port = 0;
    server.token = options_.store.token;
    server.follower = true;
    server.log = options_.log;
    copy_ = std::make_unique<RendezvousServer>(server);
    StoreMirrorOptions mirror;
    mirror.primary = options_.store;
    const auto primary = options_.store.route->address();  // the leader's, whatever moves later
    mirror.primary.route = nullptr;
    mirror.primary.host = primary.host;
    mirror.primary.port = primary.port;
    mirror.log = options_.log;
    mirror_ = std::make_unique<StoreMirror>(*copy_, mirror);
    log(fmt::format("node {} keeps a copy of node {}'s store, at {}", options_.node,
                    options_.leader, copy_->address()));
  }
  standby_ = StandbyAddress{generation, options_.node, {options_.advertise_host, copy_->port()}};
  primary_.set(kStandbyKey, standby_text(*standby_));
}

void LeaderFailover::stop_standing_by(bool say) {
  if (!copy_) return;
  if (mirror_) mirror_->stop();
  mirror_.reset();
  copy_.reset();
  if (say)
    log(fmt::format(
        "node {} stopped its copy of node {}'s store: another node keeps it in this layout",
        options_.node, options_.leader));
}

void LeaderFailover::refresh() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (standby_node_ < 0 || standby_node_ == options_.node ||
      now - last_read_ < options_.refresh_every)
    return;
  last_read_ = now;
  try {
    const auto text = primary_.get(kStandbyKey);
    if (!text) return;
    const auto read = parse_standby(rendezvous::to_text(*text));
    // Another node's address (a standby of an older layout) is not this layout's.
    if (read.node == standby_node_) standby_ = read;
  } catch (const std::exception&) {
    // The leader's store unreachable: its loss is the liveness watch's to report.
  }
}

Election LeaderFailover::election() {
  std::lock_guard lock(mu_);
  return elect(nodes_, options_.leader, {});
}

std::string LeaderFailover::fail_over(const std::string& why, const std::string& holdings) {
  const auto lost = fmt::format("node {} was lost", options_.leader);
  const Election election = this->election();
  std::string outcome;
  if (!election.refused.empty())
    outcome =
        fmt::format("{}; no node can be elected to lead: {}; the job ends", lost, election.refused);
  else if (election.successor == options_.node)
    outcome = lead(lost, holdings);
  else
    outcome = follow(lost, election.successor);
  return fmt::format("{} ({})", outcome, why);
}

// The successor: promotes its copy of the store, records its term there, and waits for
// the other survivors to reach it.
std::string LeaderFailover::lead(const std::string& lost, const std::string& holdings) {
  std::lock_guard lock(mu_);
  const auto elected = elected_line(lost, options_.node);
  if (!copy_) return fmt::format("{}, but it runs no copy of the store: the job ends", elected);
  mirror_->stop();  // no late change after the promotion
  const auto seq = mirror_->seq();
  copy_->promote();
  std::vector<int> followed, missing;
  try {
    RendezvousClientOptions local = options_.store;
    local.route = nullptr;
    local.host = options_.advertise_host;
    local.port = copy_->port();
    local.connect_timeout = options_.reach_timeout;
    RendezvousClient store(local);
    store.set(kLeaderKey, fmt::format("{} {} {}", kTerm, options_.node, copy_->address()));
    const auto deadline = std::chrono::steady_clock::now() + options_.reach_timeout;
    for (int n : nodes_) {
      if (n == options_.leader || n == options_.node) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        store.wait(follows_key(n), std::max(left, std::chrono::milliseconds(1)));
        followed.push_back(n);
      } catch (const RendezvousError&) {
        missing.push_back(n);
      }
    }
  } catch (const RendezvousError& e) {
    return fmt::format("{}, but its promoted store failed ({}): the job ends", elected, e.what());
  }
  std::string others =
      followed.empty() ? "" : fmt::format(", node(s) [{}] follow it", fmt::join(followed, ", "));
  if (!missing.empty())
    others += fmt::format(", node(s) [{}] did not reach it within {}", fmt::join(missing, ", "),
                          rendezvous::describe_duration(options_.reach_timeout));
  return fmt::format("{}: it promoted its copy of the store (seq {}) at {}{}{}, {}", elected, seq,
                     copy_->address(), others,
                     holdings.empty() ? "" : fmt::format(", and it holds {}", holdings),
                     not_implemented());
}

// Another survivor: moves every store client of this process to the successor's copy
// and checks that it reaches it, promoted.
std::string LeaderFailover::follow(const std::string& lost, int successor) {
  std::optional<StandbyAddress> standby;
  {
    std::lock_guard lock(mu_);
    standby = standby_;
  }
  const auto elected = elected_line(lost, successor);
  if (!standby || standby->node != successor)
    return fmt::format(
        "{}, but this node never learnt where its copy of the store listens: the job ends",
        elected);
  const auto at = rendezvous::host_port(standby->store.host, standby->store.port);
  options_.store.route->move_to(standby->store.host, standby->store.port);
  try {
    RendezvousClientOptions check = options_.store;  // through the route, as every client here
    check.connect_timeout = options_.reach_timeout;
    check.io_timeout = options_.reach_timeout;
    RendezvousClient store(check);
    const auto leader = rendezvous::to_text(store.wait(kLeaderKey, options_.reach_timeout));
    store.set(follows_key(options_.node), "1");
    return fmt::format(
        "{}: this node follows node {} and reached its promoted store at {} (leader: {}), {}",
        elected, successor, at, leader, not_implemented());
  } catch (const RendezvousError& e) {
    return fmt::format(
        "{}: this node follows node {} but could not reach its promoted store at {} ({}): the job "
        "ends",
        elected, successor, at, e.what());
  }
}

}  // namespace conveyor
