#pragma once
// Why a stage actor ended or did not answer, in words naming its node and that node's
// stages. CAF reports these as its own codes, which meant nothing to a user reading a
// failed job's error ("stage 2 failed: exit_reason(kill)" on a node that had been frozen,
// "system_error(request_receiver_down)" for a stage of a process that was gone). Errors
// with a message of their own (a stage's exception, a transfer's failure) pass through.
#include <caf/all.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace conveyor {

/// "node 1 (stages 2-3)", "node 2 (stage 4)", "node 1 (stages 0, 2, 5)": the ranks of
/// `node` in node_of_rank (every stage actor's node, replica-major).
std::string node_and_stages(int node, const std::vector<int>& node_of_rank);

/// Why stage `rank` ended (a down message's reason) or did not answer a request, seen
/// from process `here`; node_of_rank empty: a job of one process. `peer_silence`: how
/// long a node may go without a heartbeat before node 0 takes its stages away
/// (rendezvous.peer_silence_s, NodeSetup::peer_silence), which the words quote.
std::string stage_end_text(const caf::actor_system& system, const caf::error& e, int rank,
                           const std::vector<int>& node_of_rank, int here = 0,
                           std::chrono::milliseconds peer_silence = std::chrono::seconds(5));

}  // namespace conveyor
