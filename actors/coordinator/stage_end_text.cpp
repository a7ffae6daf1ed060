#include "actors/coordinator/stage_end_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actors/messages/error_text.hpp"
#include "transport/rendezvous/error.hpp"

namespace conveyor {

std::string node_and_stages(int node, const std::vector<int>& node_of_rank) {
  std::vector<int> ranks;
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    if (node_of_rank[r] == node) ranks.push_back(static_cast<int>(r));
  if (ranks.empty()) return fmt::format("node {}", node);
  if (ranks.size() == 1) return fmt::format("node {} (stage {})", node, ranks.front());
  const bool contiguous = ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size());
  if (contiguous) return fmt::format("node {} (stages {}-{})", node, ranks.front(), ranks.back());
  return fmt::format("node {} (stages {})", node, fmt::join(ranks, ", "));
}

std::string stage_end_text(const caf::actor_system& system, const caf::error& e, int rank,
                           const std::vector<int>& node_of_rank, int here,
                           std::chrono::milliseconds peer_silence) {
  const bool known = rank >= 0 && static_cast<std::size_t>(rank) < node_of_rank.size();
  const int node = known ? node_of_rank[static_cast<std::size_t>(rank)] : here;
  const bool remote = known && node != here;
  const std::string where = known ? node_and_stages(node, node_of_rank) : "its process";
  std::string words;
  if (e == caf::exit_reason::kill) {
    words = here != 0 && !remote
                ? fmt::format("node 0 ended it to replace it: node 0 takes a stage away from a node "
                              "that stopped answering (for {}: frozen, stopped or cut off) or from a "
                              "stage that hung, and {} was not asked for a replacement",
                              rendezvous::describe_duration(peer_silence), where)
                : "it was ended to be replaced (its node stopped answering, or it hung)";
  } else if (e == caf::exit_reason::user_shutdown) {
    words = remote ? fmt::format("{} stopped answering: that process ended its stages (its own "
                                 "log says why)", where)
                   : "it was shut down while the job still needed it";
  } else if (e == caf::exit_reason::remote_link_unreachable) {
    words = fmt::format("{} stopped answering: its connection broke", where);
  } else if (e == caf::sec::request_receiver_down) {
    words = remote ? fmt::format("{} stopped answering: stage {} is no longer running there", where,
                                 rank)
                   : fmt::format("stage {} is no longer running", rank);
  } else if (e == caf::sec::request_timeout) {
    words = fmt::format("{} stopped answering: stage {} did not reply in time", where, rank);
  } else {
    return error_text(system, e);
  }
  return words;
}

}  // namespace conveyor
