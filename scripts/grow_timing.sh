#!/usr/bin/env bash
# Issue 44's grow, timed (docs/RELIABILITY.md "Elastic shrink and grow"): the tiny config
# on 3 stages over 3 processes on loopback; node 2 is SIGKILLed once node 0's progress
# reaches step KILL_AT, the job shrinks onto nodes 0 and 1 (fault.rejoin_timeout_s 2),
# and once node 0 logged that, node 2's command is started again: it joins and the job
# grows back to 3 stages. Printed per run: the joined row's ms (from the join reaching
# node 0's coordinator to every stage of the grown layout restored, i.e. the first step on
# it starting: it includes the wait for the step boundary), the wall time from the new
# process's start to node 0's "joined: node 2 taken in" line, and whether the weights
# equal the one-process run's bit for bit (run first, into OUT/one).
#   scripts/grow_timing.sh [KILL_AT...]     (default: 10 30 50)
# STEPS (200), SLOW_MS (0: no fault.inject slow on stage 0, which only stretches steps) and
# CHECKPOINT_EVERY (0: none; else checkpoint.every on the 3-process runs, which then shrink
# and grow while writing checkpoints) and BUDDY_COPIES (auto; off: the shrink goes back to
# the newest checkpoint, so it needs CHECKPOINT_EVERY, and the grow asks node 1 for copies
# of its boundary's snapshots) are read from the environment; OUT (a temporary folder)
# keeps the runs. Each run also prints the replan row's ms and phases_ms, and without buddy
# copies how long the grow's copies took to arrive.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/loopback_common.sh
STEPS=${STEPS:-200}
SLOW_MS=${SLOW_MS:-0}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-0}
BUDDY_COPIES=${BUDDY_COPIES:-auto}
KILLS=("$@")
[ ${#KILLS[@]} -eq 0 ] && KILLS=(10 30 50)
JOB=(configs/tiny.yaml --set pipeline.stages=3 --set train.steps="$STEPS" --set train.eval_every=0)
"$BIN" train "${JOB[@]}" --out "$OUT/one" > "$OUT/one.log" 2>&1
JOB+=(--set fault.rejoin_timeout_s=2)
[ "$SLOW_MS" -gt 0 ] && JOB+=(--set "fault.inject=slow:stage=0:ms=$SLOW_MS")
[ "$CHECKPOINT_EVERY" -gt 0 ] && JOB+=(--set "checkpoint.every=$CHECKPOINT_EVERY")
JOB+=(--set "fault.buddy_copies=$BUDDY_COPIES")
export CONVEYOR_TOKEN=grow-timing
latest_step() { grep -oE '^step [0-9]+' "$1" | tail -1 | cut -d' ' -f2; }
for k in "${KILLS[@]}"; do
  d="$OUT/kill$k"
  mkdir -p "$d"
  port=$(free_port)
  pids=()
  for n in 0 1 2; do
    start_node "$d" "$port" $n
    pids+=($!)
  done
  until [ "$(latest_step "$d/node0.err")" -ge "$k" ] 2>/dev/null; do sleep 0.02; done
  kill -9 "${pids[2]}"
  wait "${pids[2]}" 2>/dev/null || true
  until grep -q "replan: node 2 lost for good" "$d/node0.err"; do sleep 0.02; done
  start=$(date +%s%N)
  "$BIN" train "${JOB[@]}" --nnodes 3 --node-rank 2 --rdzv 127.0.0.1:$port --out "$d/run" \
    > "$d/node2.joined.out" 2> "$d/node2.joined.err" &
  joined=$!
  until grep -q "joined: node 2 taken in" "$d/node0.err" || ! kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.01; done
  taken=$(date +%s%N)
  codes=""
  for p in "${pids[0]}" "${pids[1]}" "$joined"; do
    if wait "$p"; then codes+="0 "; else codes+="$? "; fi
  done
  ms=$(grep -o '"event":"joined".*' "$d/run/metrics.jsonl" | grep -o '"ms":[0-9.]*' | cut -d: -f2 || echo none)
  replan=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row.get("event") == "replan":
        print("ms %.1f, phases_ms %s" % (row["ms"], json.dumps(row.get("phases_ms"))))
        break' "$d/run/metrics.jsonl")
  copies=$(grep -o 'they arrived in [0-9.]* ms' "$d/node0.err" | head -1 || true)
  same=$(cmp -s "$d/run/weights.safetensors" "$OUT/one/weights.safetensors" && echo "bitwise equal" || echo DIFFER)
  echo "kill at step >= $k: exit codes ${codes}; replan row ${replan}; joined row ms ${ms}${copies:+ (copies: $copies)}; start to taken in $(((taken - start) / 1000000)) ms; weights ${same}"
done
echo "runs in $OUT"
