#pragma once
// The communication pass: turns a compute-only schedule into one that names every
// cross-rank message. Sends go right after the compute action that produces the data,
// receives right before the one that consumes it, so a rank never receives earlier than
// it must nor holds a finished result back. Hand-offs between two chunks of one rank
// (zbv's tip of the V) get no action.
// Messages on one pipeline edge (model stage s → s±1) then go in the order of the two
// ranks' compute lists; the generators run each chunk's F and B/I in micro-batch order, so
// both ends agree, and validate() checks it for any schedule. Messages of different edges
// between the same two ranks can cross (zbv): give each edge its own channel or match by
// (micro-batch, model stage), never by arrival order per rank pair.
// Pure function: no CAF.
#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

/// True when any rank's list holds a SEND or RECV action.
bool has_communication(const Schedule& schedule);

/// The same schedule with SEND_F/RECV_F/SEND_B/RECV_B added. Throws InputError when the
/// input already has communication actions.
Schedule add_communication(const Schedule& schedule);

/// The compute-only schedule underneath: every SEND and RECV removed.
Schedule strip_communication(const Schedule& schedule);

}  // namespace conveyor::sched
