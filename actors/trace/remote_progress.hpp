#pragma once
// The hang watchdog over several processes: node 0 runs the one watchdog of the job, over
// a ProgressBoard of every rank. Its own stages publish into it directly; every other node
// reports its stages' states a few times a second (ProgressReport, actors/messages/messages.hpp),
// and node 0 copies them into the board. Pure: no CAF, clocks are arguments.
//
// Clocks: a stage's `since_ns` is on its own host's steady clock, which another host does
// not share. A report therefore carries each state's age at the moment it was made, and
// node 0 dates the state `age` before the moment the report arrived: exact to within the
// report's time in flight (far below any watchdog.timeout_s), whatever the hosts' clocks.
// What must hold: node 0 writes a rank's entry only from reports of the node that runs
// it (a report naming another node's rank, an unknown state or a negative age is refused
// whole, naming what is wrong), and an entry never published stays unpublished (it counts
// from the watchdog's start, as a local stage that has not begun).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/trace/stage_progress.hpp"

namespace conveyor::trace {

/// One stage's state as another node saw it.
struct RemoteStageProgress {
  int rank = 0;
  std::uint8_t state = 0;  // StageState
  std::int64_t round = 0;
  std::int64_t step = 0;
  bool eval = false;
  std::int64_t slot = 0;
  std::int64_t age_ns = -1;  // time in this state when reported; -1: never published
  std::int64_t first_micro_batch = 0;
};

/// The states of `ranks` (this node's) in `board`, aged at `now_ns` (this host's clock).
std::vector<RemoteStageProgress> progress_report(const ProgressBoard& board,
                                                 const std::vector<int>& ranks, std::int64_t now_ns);

/// Copies a report of node `node`, which runs `node_ranks`, into `board`, dating each
/// state at `now_ns` (this host's clock) minus its age. Returns why the report was
/// refused (nothing written), or nothing.
std::optional<std::string> apply_progress_report(ProgressBoard& board, int node,
                                                 const std::vector<int>& node_ranks,
                                                 const std::vector<RemoteStageProgress>& report,
                                                 std::int64_t now_ns);

}  // namespace conveyor::trace
