#!/usr/bin/env bash
# Issue 44's shrink of a ~100 M-parameter CPU model, timed (docs/RELIABILITY.md "A ~100
# M-parameter CPU model"): tiny.yaml widened to 15 layers of 768 (106 M parameters), 3
# one-stage processes on loopback, 3 micro-batches of 1, STEPS (8) steps,
# fault.rejoin_timeout_s 2; node 2 is SIGKILLed once step KILL_AT (3) is in
# metrics.jsonl and the job shrinks onto nodes 0 and 1. Printed: the exit codes, the
# replan row (its ms and phases_ms: wait, cut, spawn, restore) and node 1's restore line
# (bytes received and kept, seconds). With CHECK=1 the one-process run goes first and
# the shrunk run's weights are compared with its own byte for byte.
#   scripts/shrink_timing.sh            OUT (a temporary folder) keeps the runs
# Extra `--set` options for both runs may follow, e.g. `--set model.layers=6`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/loopback_common.sh
STEPS=${STEPS:-8}
KILL_AT=${KILL_AT:-3}
JOB=(configs/tiny.yaml --set pipeline.stages=3 --set train.steps="$STEPS" --set train.eval_every=0
     --set model.layers=15 --set model.d_model=768 --set model.heads=12 --set model.seq_len=64
     --set pipeline.micro_batches=3 --set pipeline.micro_batch_size=1 "$@")
if [ "${CHECK:-0}" = 1 ]; then
  "$BIN" train "${JOB[@]}" --out "$OUT/one" > "$OUT/one.log" 2>&1
fi
JOB+=(--set fault.rejoin_timeout_s=2)
export CONVEYOR_TOKEN=shrink-timing
port=$(free_port)
d="$OUT/shrink"
mkdir -p "$d"
pids=()
for n in 0 1 2; do
  start_node "$d" "$port" $n
  pids+=($!)
done
step_done() { grep -q "\"step\":$KILL_AT[,}]" "$d/run/metrics.jsonl" 2>/dev/null; }
until step_done || ! kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.05; done
kill -9 "${pids[2]}"
wait "${pids[2]}" 2>/dev/null || true
codes=""
for p in "${pids[0]}" "${pids[1]}"; do
  if wait "$p"; then codes+="0 "; else codes+="$? "; fi
done
echo "exit codes (nodes 0, 1): ${codes}"
grep -o '"event":"replan".*' "$d/run/metrics.jsonl" || echo "no replan row"
grep -h "restore:" "$d/node1.err" || true
if [ "${CHECK:-0}" = 1 ]; then
  cmp -s "$d/run/weights.safetensors" "$OUT/one/weights.safetensors" && echo "weights bitwise equal" ||
    echo "weights DIFFER"
fi
echo "runs in $OUT"
