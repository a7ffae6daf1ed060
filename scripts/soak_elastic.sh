#!/usr/bin/env bash
# Elastic soak (issue 44; docs/RELIABILITY.md "Elastic shrink and grow"), run as
# `MODE=elastic scripts/soak.sh`: the tiny config on 3 stages, STEPS steps, once in one
# process without faults, then over 3 one-stage processes on loopback while FAULTS nodes
# k > 0 are SIGKILLed for good: each kill makes the job shrink at fault.rejoin_timeout_s
# (WAIT_S); while one node is down, the other is sometimes killed too (the job shrinks down
# to node 0 alone), else a killed node's command is started again and the job grows back.
# At the end every killed node is started again. Kill i waits for step 1 + i·(STEPS−10)/FAULTS,
# so the faults spread over the run; stage 0 sleeps SLOW_MS in each compute action
# (fault.inject slow, which changes no number) so that a shrink and a grow fit between two.
# The weights must equal the one-process run's byte for byte; printed: faults, shrinks,
# grows, the replan and joined rows' ms and phases_ms medians, steps redone; exit 1 if
# the weights differ, a process failed, or fewer faults than asked for could be made.
# Not part of CI (about 2 minutes on 2 cores).
#
#   MODE=elastic scripts/soak.sh    # STEPS=200 FAULTS=20 SLOW_MS=25 WAIT_S=1 SEED=1 OUT=runs/soak-elastic
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BIN=${CONVEYOR:-build/conveyor}
STEPS=${STEPS:-200}
FAULTS=${FAULTS:-20}
SLOW_MS=${SLOW_MS:-25}
WAIT_S=${WAIT_S:-1}
SEED=${SEED:-1}
OUT=${OUT:-runs/soak-elastic}
[[ -x "$BIN" ]] || { echo "soak: $BIN is not built (scripts/bootstrap.sh builds it)" >&2; exit 2; }
(( FAULTS >= 1 && STEPS >= 20 )) || { echo "soak: FAULTS must be at least 1 and STEPS at least 20" >&2; exit 2; }
RANDOM=$SEED

JOB=(configs/tiny.yaml --set pipeline.stages=3 --set "train.steps=$STEPS" --set train.eval_every=0)
rm -rf "$OUT"
mkdir -p "$OUT"
start=$SECONDS
"$BIN" train "${JOB[@]}" --out "$OUT/reference" 2> "$OUT/reference.log" > /dev/null

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Every shrink is a recovery: the default fault.max_restarts (3 in 10 minutes) would end it.
JOB+=(--set fault.max_restarts=1000 --set "fault.rejoin_timeout_s=$WAIT_S" --set "fault.inject=slow:stage=0:ms=$SLOW_MS"
      --nnodes 3 --rdzv "127.0.0.1:$port" --out "$OUT/elastic")
export CONVEYOR_TOKEN=soak-elastic-$SEED
log0=$OUT/node0.log
declare -A pid=() starts=()
launch() {  # node: starts node's command (again), its log numbered by the start
  local n=$1
  starts[$n]=$(( ${starts[$n]:-0} + 1 ))
  "$BIN" train "${JOB[@]}" --node-rank "$n" 2> "$OUT/node$n-${starts[$n]}.log" > /dev/null &
  pid[$n]=$!
}
count() { grep -c -- "$1" "$log0" 2>/dev/null || true; }
# The run's latest step, from metrics.jsonl (a row per step; progress lines come every STEPS/20).
latest_step() { { grep -v '"event"' "$OUT/elastic/metrics.jsonl" 2>/dev/null || true; } | tail -n 1 | grep -oE '"step":[0-9]+' | cut -d: -f2 || true; }
running() { kill -0 "${pid[0]}" 2>/dev/null; }
# Waits until node 0's log holds more than `before` lines matching `pattern`, or `give_up`
# (a pid) ends, or node 0 ends; returns 1 unless the line came.
wait_for_line() {
  local pattern=$1 before=$2 give_up=${3:-}
  until (( $(count "$pattern") > before )); do
    running || return 1
    [[ -n $give_up ]] && ! kill -0 "$give_up" 2>/dev/null && return 1
    sleep 0.02
  done
}

"$BIN" train "${JOB[@]}" --node-rank 0 2> "$log0" > /dev/null &
pid[0]=$!
launch 1
launch 2
# Kill i comes once the run reached step 1 + i * gap: the faults spread over the run.
gap=$(( (STEPS - 10) / FAULTS ))
(( gap >= 3 )) || { echo "soak: FAULTS must be at most (STEPS - 10) / 3" >&2; exit 2; }
wait_for_step() { until [[ "$(latest_step)" -ge $1 ]] 2>/dev/null; do running || return 1; sleep 0.05; done; }

live=(1 2)  # nodes k > 0 running a stage
dead=()     # nodes killed and not started again yet
kills=0 restarts=0 doubles=0 actions=()
restart_one() {
  local i=$(( RANDOM % ${#dead[@]} )) n
  n=${dead[$i]}
  dead=("${dead[@]:0:$i}" "${dead[@]:$((i + 1))}")
  local before
  before=$(count "joined: node $n taken in")
  launch "$n"
  if ! wait_for_line "joined: node $n taken in" "$before" "${pid[$n]}"; then
    echo "soak: node $n started again was not taken in (see $OUT/node$n-${starts[$n]}.log)" >&2
    return 1
  fi
  live+=("$n")
  restarts=$(( restarts + 1 ))
  actions+=("+$n@$(latest_step)")
}
while (( kills < FAULTS )); do
  running || break
  # Let 0-0.5 s of the run pass, so that the faults fall anywhere in a step.
  sleep "0.$(( RANDOM % 6 ))"
  if (( ${#dead[@]} > 0 )) && (( ${#live[@]} == 0 || RANDOM % 3 != 0 )); then
    restart_one || break
    continue
  fi
  wait_for_step $(( 1 + kills * gap )) || break
  i=$(( RANDOM % ${#live[@]} ))
  n=${live[$i]}
  (( ${#dead[@]} > 0 )) && doubles=$(( doubles + 1 ))
  before=$(count "replan: node $n lost for good")
  kill -9 "${pid[$n]}"
  wait "${pid[$n]}" 2>/dev/null || true
  live=("${live[@]:0:$i}" "${live[@]:$((i + 1))}")
  dead+=("$n")
  kills=$(( kills + 1 ))
  actions+=("-$n@$(latest_step)")
  wait_for_line "replan: node $n lost for good" "$before" || {
    echo "soak: node 0 ended before the job shrank without node $n" >&2; break; }
done
while (( ${#dead[@]} > 0 )) && running; do restart_one || break; done

status=0
codes=""
for n in 0 1 2; do
  c=0; wait "${pid[$n]}" 2>/dev/null || c=$?
  # A node killed for good and never started again has no exit status of its own to count.
  codes+="node $n: $c  "
  [[ " ${dead[*]} " == *" $n "* ]] || (( c == 0 )) || status=1
done
elapsed=$(( SECONDS - start ))

echo "faults (+n: node n started again, -n: killed, @ node 0's latest step): ${actions[*]}"
python3 - "$OUT/elastic/metrics.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for event in ("replan", "joined"):
    rs = [r for r in rows if r.get("event") == event]
    if not rs:
        print(f"{event}: none"); continue
    phases = {p: statistics.median(r["phases_ms"][p] for r in rs) for p in ("wait", "cut", "spawn", "restore")}
    print(f"{event} rows: {len(rs)}; ms median {statistics.median(r['ms'] for r in rs):.1f}, worst "
          f"{max(r['ms'] for r in rs):.1f}; phases_ms medians " +
          ", ".join(f"{p} {v:.1f}" for p, v in phases.items()) +
          f"; steps redone {sum(r['steps_redone'] for r in rs)}")
stages = [r for r in rows if "step" in r and "event" not in r]
print(f"steps reported: {len(stages)} (replays included)")
EOF
echo "soak elastic: $kills kills ($doubles with the other node already down: the job on node 0" \
     "alone), $restarts nodes started again; exit codes ${codes}; both runs ${elapsed} s"
if (( kills < FAULTS )); then
  echo "soak: only $kills of $FAULTS faults before the run ended (raise SLOW_MS or STEPS)"; status=1
fi
if cmp -s "$OUT/reference/weights.safetensors" "$OUT/elastic/weights.safetensors"; then
  echo "weights: identical to the one-process run without faults"
else
  echo "weights: DIFFERENT from the one-process run without faults, or missing (see $OUT/node*.log)"
  status=1
fi
exit $status
