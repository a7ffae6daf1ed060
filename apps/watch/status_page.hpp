#pragma once
// The page at `/`: for now a MINIMAL one, plain HTML rendered on the server and reloaded
// every 5 seconds (no script, no chart): the job, step of steps and ETA, loss and eval
// loss, tokens/s and MFU, each stage's device, node and busy share, the bubble, recovery
// and checkpoint counts, and links to /metrics and /api/status. The live page of issue 45
// (Chart.js from Debian's libjs-chart.js, updated over /api/events, the pipeline timeline)
// replaces it; it is not written yet.
#include <string>
#include <string_view>

#include "apps/watch/run_status.hpp"

namespace conveyor::watch {

std::string status_page(const RunStatus& s);

/// Text escaped for HTML element content and attribute values.
std::string html_escape(std::string_view text);

}  // namespace conveyor::watch
