#!/usr/bin/env bash
# Issue 44's shrink without buddy copies, timed (docs/RELIABILITY.md "Elastic shrink and
# grow"): the tiny config on 3 stages over 3 processes on loopback, fault.buddy_copies off,
# a checkpoint every CHECKPOINT_EVERY (4) steps, fault.rejoin_timeout_s 2; node 2's process
# ends for good at the start of step K (fault.inject exit, so K is exact), and the job
# shrinks onto nodes 0 and 1 from the newest verified checkpoint. Printed per K: the exit
# codes, the replan row (restored_from, steps_redone, ms, phases_ms), the whole job's wall
# time, and whether the weights equal the one-process run's bit for bit (run first, into
# OUT/one).
#   scripts/checkpoint_shrink_timing.sh [K...]     (default: 6 9 13 16)
# STEPS (24) and CHECKPOINT_EVERY (4) are read from the environment; OUT (a temporary
# folder) keeps the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/loopback_common.sh
STEPS=${STEPS:-24}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-4}
KILLS=("$@")
[ ${#KILLS[@]} -eq 0 ] && KILLS=(6 9 13 16)
BASE=(configs/tiny.yaml --set pipeline.stages=3 --set train.steps="$STEPS" --set train.eval_every=0)
"$BIN" train "${BASE[@]}" --out "$OUT/one" > "$OUT/one.log" 2>&1
export CONVEYOR_TOKEN=checkpoint-shrink-timing
for k in "${KILLS[@]}"; do
  JOB=("${BASE[@]}" --set fault.buddy_copies=off --set "checkpoint.every=$CHECKPOINT_EVERY" --set checkpoint.keep=10
       --set fault.rejoin_timeout_s=2 --set "fault.inject=[exit:node=2:step=$k]")
  d="$OUT/exit$k"
  mkdir -p "$d"
  port=$(free_port)
  began=$(date +%s%N)
  pids=()
  for n in 0 1 2; do
    start_node "$d" "$port" $n
    pids+=($!)
  done
  codes=""
  for p in "${pids[@]}"; do
    if wait "$p"; then codes+="0 "; else codes+="$? "; fi
  done
  ended=$(date +%s%N)
  replan=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row.get("event") == "replan":
        print("restored_from %s, steps_redone %d, ms %.1f, phases_ms %s" % (row["restored_from"],
              row["steps_redone"], row["ms"], json.dumps(row.get("phases_ms"))))
        break
else:
    print("none")' "$d/run/metrics.jsonl")
  same=$(cmp -s "$d/run/weights.safetensors" "$OUT/one/weights.safetensors" && echo "bitwise equal" || echo DIFFER)
  echo "node 2 exits at step $k: exit codes (nodes 0, 1, 2) ${codes}; replan row ${replan}; job $(((ended - began) / 1000000)) ms; weights ${same}"
done
echo "runs in $OUT"
