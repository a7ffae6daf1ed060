#include "actors/coordinator/coordinator_phase.hpp"

#include <stdexcept>
#include <string>

namespace conveyor {

std::string_view coordinator_phase_name(CoordinatorPhase phase) {
  switch (phase) {
    case CoordinatorPhase::starting: return "starting";
    case CoordinatorPhase::running: return "running";
    case CoordinatorPhase::recovering: return "recovering";
    case CoordinatorPhase::finishing: return "finishing";
  }
  return "unknown";
}

bool may_transition(CoordinatorPhase from, CoordinatorPhase to) {
  using P = CoordinatorPhase;
  switch (from) {
    case P::starting: return to == P::running;
    case P::running: return to == P::recovering || to == P::finishing;
    case P::recovering: return to == P::running;
    case P::finishing: return false;
  }
  return false;
}

CoordinatorPhase transition(CoordinatorPhase from, CoordinatorPhase to) {
  if (!may_transition(from, to))
    throw std::logic_error("coordinator: no transition from phase " +
                           std::string(coordinator_phase_name(from)) + " to " +
                           std::string(coordinator_phase_name(to)));
  return to;
}

}  // namespace conveyor
