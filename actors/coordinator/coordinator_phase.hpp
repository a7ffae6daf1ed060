#pragma once
// The coordinator's phase (coordinator_actor.hpp) and the transitions between them, free
// of CAF so that they are tested on their own. Which round a running coordinator is in
// (train or eval) is the round's Phase, sent with every plan; this is the run's.
#include <string_view>

namespace conveyor {

enum class CoordinatorPhase {
  starting,    // the first snapshot is being taken; no plan is under way yet
  running,     // steps and evaluations go on
  recovering,  // a failure is being recovered from; reports of aborted rounds are void
  finishing,   // the run ended well: the final weights are gathered, or it stopped
};

std::string_view coordinator_phase_name(CoordinatorPhase phase);

/// Whether the coordinator may go from `from` to `to`: starting → running once the first
/// snapshot is taken, running ⇄ recovering, running → finishing. A recovery never starts
/// before the run has (nothing to restore) nor after it finished, and a recovery always
/// ends in running: the run finishes only from a completed step.
bool may_transition(CoordinatorPhase from, CoordinatorPhase to);

/// `to`, when may_transition(from, to); else throws std::logic_error naming both.
CoordinatorPhase transition(CoordinatorPhase from, CoordinatorPhase to);

}  // namespace conveyor
