#pragma once
// A run's status as the JSON of /api/status: the same facts as /metrics (prometheus_text.hpp),
// with the curves and recent events a page draws. Unknown values are null.
//
//   {"run": "r" (the folder's name), "state": "running", "step": 12, "steps": 400, "eta_s": 81.2,
//    "job": {"model": {...}, "schedule": "1f1b", "stages": 4, "micro_batches": 8, ...},
//    "last_step": {"step": 11, "loss": ..., "lr": ..., "grad_norm": ..., "tokens_per_s": ...,
//                  "step_ms": ..., "bubble": ...} | null,
//    "eval_loss": ..., "model_flops_per_s": ..., "model_flops_utilization": ...,
//    "stages": [{"stage", "pipeline_stage", "replica", "device", "node", "busy_ms", "busy_ratio"}],
//    "stages_alive": 4, "nodes": [{"node": 0, "alive": true}, ...],
//    "events": [{"kind": "recovery: crash" | "node_lost" | "replan" | ..., "step", "detail"}],
//    "sample": {"step", "text", "prompt"} | null,
//    "bubble": {"measured": ..., "measured_mean": ..., "simulated": ...},
//    "curves": {"loss": [[step, loss], ...], "eval_loss": [[step, loss], ...]},
//    "recoveries": {"total": {"crash": 0, ...}, "recent": [...]},
//    "checkpoints": {"count": ..., "last": {"step", "seconds", "bytes", "path"} | null},
//    "stragglers": ..., "skipped_steps": ..., "nodes_lost": ..., "resumed_from": ...,
//    "summary": {"final_loss", "final_val_loss", "tokens_per_s"} | null, "stop_reason": ...,
//    "rows": {"read": ..., "unknown": ..., "unreadable": ...}}
#include <nlohmann/json.hpp>

#include "apps/watch/run_status.hpp"

namespace conveyor::watch {

nlohmann::json status_json(const RunStatus& s);

}  // namespace conveyor::watch
