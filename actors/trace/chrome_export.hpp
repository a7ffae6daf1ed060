#pragma once
// A trace as Chrome trace-event JSON (the format chrome://tracing and Perfetto open):
//   {"traceEvents": [...], "displayTimeUnit": "ms"}
// - one process (pid) per trace file (host process), named "host H (process N)";
// - one track (tid) per stage and stream: tid = (stage + 1) * 4 + stream, stream 0
//   compute, 1 send, 2 receive; the coordinator is stage -1 (tids 0..2);
// - every record a complete event (ph "X", ts/dur in µs from the earliest record);
// - every send with its receive a flow (ph "s" on the send, ph "f" with bp "e" on the
//   receive, sharing id = the send's record id);
// - every round start a global instant event (ph "i", s "g") named "step N" / "eval step N";
// - every re-layout (issue 44) a slice on the coordinator's compute track, from the loss's
//   detection or the join to the new layout restored: "replan: node 2 lost for good",
//   "joined: node 2 taken in" (cat "replan" / "joined", args.node, args.step the step the
//   run goes on from).
// Pure.
#include <nlohmann/json.hpp>

#include "actors/trace/trace_set.hpp"

namespace conveyor::trace {

nlohmann::json chrome_trace(const TraceSet& set);

/// The name of a record's event: "F3", "F3c1", "send F3 → stage 2", "plan → stage 1", …
std::string event_name(const Record& r);

}  // namespace conveyor::trace
