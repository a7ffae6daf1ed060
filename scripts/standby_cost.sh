#!/usr/bin/env bash
# What the standby's copies cost (issue 44 item 7, docs/RELIABILITY.md "The standby"):
# the same 3-process job on loopback, no fault, with a binary without the standby
# (BASE, e.g. a build of main) and with it (CONVEYOR, build/conveyor), alternated PAIRS
# (3) times so that the machine's load falls on both alike. Printed per run: the median
# step_ms of metrics.jsonl over the steps after the first 5, and the whole job's seconds;
# then node 1's standby line (the bytes of node 0's copy a step).
#   BASE=/path/to/conveyor-of-main scripts/standby_cost.sh [--set key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/loopback_common.sh
: "${BASE:?set BASE to a conveyor binary without the standby (a build of main)}"
PAIRS=${PAIRS:-3}
STEPS=${STEPS:-60}
JOB=(configs/tiny.yaml --set pipeline.stages=3 --set train.steps="$STEPS" --set train.eval_every=0 "$@")
export CONVEYOR_TOKEN=standby-cost
median_step_ms() {
  python3 - "$1" <<'PY'
import json, statistics, sys
ms = [r["step_ms"] for r in map(json.loads, open(sys.argv[1])) if "step_ms" in r and r["step"] >= 5]
print(f"{statistics.median(ms):.2f}")
PY
}
run() {  # run LABEL BINARY: one 3-process job
  local d="$OUT/$1" port
  mkdir -p "$d"
  port=$(free_port)
  local pids=() start end
  start=$(date +%s.%N)
  for n in 0 1 2; do
    BIN=$2 start_node "$d" "$port" $n
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  printf '%-14s median step_ms %s, job %.2f s\n' "$1" "$(median_step_ms "$d/run/metrics.jsonl")" \
    "$(echo "$end - $start" | bc)"
}
for i in $(seq 1 "$PAIRS"); do
  run "before-$i" "$BASE"
  run "standby-$i" "$BIN"
done
grep -h "stands by" "$OUT"/standby-*/node1.err | sort | uniq -c
echo "runs in $OUT"
