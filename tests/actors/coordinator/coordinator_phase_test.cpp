#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "actors/coordinator/coordinator_phase.hpp"

using namespace conveyor;
using P = CoordinatorPhase;

namespace {

const P kAll[] = {P::starting, P::running, P::recovering, P::finishing};

std::string refusal(P from, P to) {
  try {
    transition(from, to);
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a run starts, recovers any number of times, and finishes from running") {
  P p = P::starting;
  p = transition(p, P::running);
  for (int i = 0; i < 3; ++i) {
    p = transition(p, P::recovering);
    p = transition(p, P::running);
  }
  p = transition(p, P::finishing);
  CHECK(p == P::finishing);
}

TEST_CASE("exactly the four legal transitions are allowed") {
  int legal = 0;
  for (P from : kAll)
    for (P to : kAll)
      if (may_transition(from, to)) ++legal;
  CHECK(legal == 4);
  CHECK(may_transition(P::starting, P::running));
  CHECK(may_transition(P::running, P::recovering));
  CHECK(may_transition(P::recovering, P::running));
  CHECK(may_transition(P::running, P::finishing));
}

TEST_CASE("illegal transitions throw, naming both phases") {
  CHECK(refusal(P::starting, P::recovering) ==
        "coordinator: no transition from phase starting to recovering");
  CHECK(refusal(P::recovering, P::finishing) ==
        "coordinator: no transition from phase recovering to finishing");
  CHECK(refusal(P::finishing, P::running) ==
        "coordinator: no transition from phase finishing to running");
  CHECK(refusal(P::starting, P::finishing) ==
        "coordinator: no transition from phase starting to finishing");
  for (P p : kAll) CHECK_THROWS_AS(transition(p, p), std::logic_error);  // no phase re-enters itself
}

TEST_CASE("every phase has a name") {
  for (P p : kAll) CHECK(coordinator_phase_name(p) != "unknown");
}
