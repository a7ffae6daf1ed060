#!/usr/bin/env bash
# Soak run of the fault tolerance (issue 7; docs/RELIABILITY.md "Soak"): the tiny config,
# 4 stages, STEPS steps, once without faults and once with FAULTS faults injected at random
# steps (seed SEED) — stage crashes at the start of a step and inside the optimizer step,
# hangs, lost messages, NaN losses (fault.on_nan rollback), one corrupted checkpoint and
# one killed process after it (under --supervise, which resumes from the checkpoint before
# the corrupted one). The two runs must end with identical weights.safetensors bytes; the
# script prints every recovery's time and their median and worst, and exits 1 otherwise.
# Then (KILLS > 0) the same job over 2 processes: node 1 is killed with SIGKILL KILLS times
# at random steps and started again at once each time (it rejoins the running job); its
# weights must equal the one-process run's too (KILL_COPIES=off: without buddy copies,
# checkpoints every 10 steps, each replacement sending every stage back to the newest
# checkpoint). Then (NOBUDDY=1) the job over 2 processes the way GPU stages run there, without buddy copies (fault.buddy_copies off) and under
# --supervise on both nodes: the in-place faults above spread over both nodes' stages,
# recovered from each process's own snapshots, checkpoints every 10 steps written by node 0
# from copies it asks for, and node 1's process killed once (exit:), whose replacement
# does not rejoin (fault.rejoin_timeout_s 0, as with GPU stages): the whole job resumes
# from its newest checkpoint. REJOIN=1 lets the replacement rejoin instead, and every stage
# goes back to the newest checkpoint in the running job (CPU stages). Its weights must
# equal the one-process run's too. WRITERS=every_node has each node write its own stages'
# shards of those checkpoints (checkpoint.writers). Not part of CI (about 4 minutes, 2 cores).
# MODE=elastic runs scripts/soak_elastic.sh instead (issue 44: nodes killed for good and
# new ones brought in; its --help says more).
#
#   scripts/soak.sh                      # STEPS=200 FAULTS=20 KILLS=5 NOBUDDY=1 REJOIN=0 SEED=1 OUT=runs/soak
#   SEED=7 STEPS=400 FAULTS=40 KILLS=0 NOBUDDY=0 scripts/soak.sh
#   MODE=elastic scripts/soak.sh         # STEPS=200 FAULTS=20 SLOW_MS=25 WAIT_S=1 SEED=1 OUT=runs/soak-elastic
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${MODE:-faults}
if [[ $MODE == elastic ]]; then exec scripts/soak_elastic.sh "$@"; fi
[[ $MODE == faults ]] || { echo "soak: MODE must be faults or elastic" >&2; exit 2; }
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BIN=${CONVEYOR:-build/conveyor}
STEPS=${STEPS:-200}
FAULTS=${FAULTS:-20}
SEED=${SEED:-1}
KILLS=${KILLS:-5}
NOBUDDY=${NOBUDDY:-1}
WRITERS=${WRITERS:-node0}
REJOIN=${REJOIN:-0}
KILL_COPIES=${KILL_COPIES:-on}
[[ $KILL_COPIES == on || $KILL_COPIES == off ]] || { echo "soak: KILL_COPIES must be on or off" >&2; exit 2; }
OUT=${OUT:-runs/soak}
[[ -x "$BIN" ]] || { echo "soak: $BIN is not built (scripts/bootstrap.sh builds it)" >&2; exit 2; }
(( FAULTS >= 7 && FAULTS * 2 < STEPS )) || {
  echo "soak: FAULTS must be at least 7 (every kind) and below STEPS/2" >&2; exit 2; }

RANDOM=$SEED
# Distinct steps in [3, STEPS-2], ascending: one fault per step.
declare -A taken=()
steps=()
while (( ${#steps[@]} < FAULTS )); do
  s=$(( 3 + RANDOM % (STEPS - 4) ))
  [[ -n "${taken[$s]:-}" ]] && continue
  taken[$s]=1
  steps+=("$s")
done
mapfile -t steps < <(printf '%s\n' "${steps[@]}" | sort -n)

# The corrupted checkpoint and the killed process take two of the middle steps (the kill
# after the corruption, with a checkpoint every 10 steps, so that the resume meets the
# corrupted checkpoint and falls back to the one before); every other kind is drawn at
# random, each at least once.
kinds=(crash optimizer hang drop nan)
mid=$(( FAULTS / 2 ))
specs=()
for i in "${!steps[@]}"; do
  s=${steps[$i]}
  stage=$(( RANDOM % 4 ))
  if (( i == mid )); then  # the newest checkpoint before the kill below
    next=${steps[$(( i + 1 ))]}
    corrupt=$(( ((next - 1) / 10) * 10 )); (( corrupt >= 10 )) || corrupt=10
    specs+=("corrupt-checkpoint:step=$corrupt")
    continue
  fi
  if (( i == mid + 1 )); then
    specs+=("exit:node=0:step=$s")
    continue
  fi
  if (( i < ${#kinds[@]} )); then kind=${kinds[$i]}; else kind=${kinds[$(( RANDOM % ${#kinds[@]} ))]}; fi
  case $kind in
    crash) specs+=("crash:stage=$stage:step=$s") ;;
    optimizer) specs+=("crash:stage=$stage:step=$s:when=optimizer") ;;
    hang) specs+=("hang:stage=$stage:step=$s") ;;
    drop) specs+=("drop:stage=$stage:step=$s") ;;
    nan) specs+=("nan:stage=$stage:step=$s") ;;
  esac
done
inject=$(IFS=,; echo "${specs[*]}")

base=(configs/tiny.yaml --set pipeline.stages=4 --set "train.steps=$STEPS"
      --set train.eval_every=0 --set fault.on_nan=rollback --set fault.max_restarts=100)
common=("${base[@]}" --set watchdog.timeout_s=1 --set checkpoint.every=10)
rm -rf "$OUT"
mkdir -p "$OUT"
echo "soak: $FAULTS faults over $STEPS steps (seed $SEED): $inject" >&2
start=$SECONDS
"$BIN" train "${common[@]}" --out "$OUT/reference" 2> "$OUT/reference.log" > /dev/null
"$BIN" train --supervise "${common[@]}" --set "fault.inject=[$inject]" --out "$OUT/faulted" \
  2> "$OUT/faulted.log" > /dev/null
elapsed=$(( SECONDS - start ))

# Prints the recovery rows of FILE as a table; sets `summary` to their median and worst.
report_recoveries() {
  echo "fault                 step  restored  recovery_ms"
  sed -E 's/.*"fault":"([a-z]+)".*"recovery_ms":([0-9.]+).*"restored_step":([0-9]+).*"step":([0-9]+).*/\1 \4 \3 \2/' \
    "$1" | awk '{printf "%-20s %5d %9d %12.1f\n", $1, $2, $3, $4}'
  summary=$(sed -E 's/.*"recovery_ms":([0-9.]+).*/\1/' "$1" | sort -g |
    awk '{v[NR]=$1} END {if (NR == 0) {print "none"; exit}
         m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2;
         printf "median %.1f ms, worst %.1f ms", m, v[NR]}')
}

# Every recovery row of every attempt (a resumed attempt appends to metrics.jsonl).
grep -h '"event":"recovery"' "$OUT"/faulted*/metrics.jsonl > "$OUT/recoveries.jsonl" || true
recoveries=$(wc -l < "$OUT/recoveries.jsonl")
report_recoveries "$OUT/recoveries.jsonl"
restarts=$(grep -c "starting attempt" "$OUT/faulted.log" || true)
fallback=$(grep -c "skipped a newer checkpoint that failed verification" "$OUT/faulted.log" || true)
echo "recoveries in place: $recoveries ($summary); process restarts by --supervise: $restarts;" \
     "checkpoint fallbacks: $fallback; both runs: ${elapsed} s"
if cmp -s "$OUT/reference/weights.safetensors" "$OUT/faulted/weights.safetensors"; then
  echo "weights: identical to the run without faults"
else
  echo "weights: DIFFERENT from the run without faults (see $OUT/faulted.log)"
  exit 1
fi
if (( KILLS > 0 )); then

# Two processes, node 1 killed KILLS times at random steps and started again each time.
kill_steps=()
for ((k = 0; k < KILLS; ++k)); do
  kill_steps+=($(( (k + 1) * STEPS / (KILLS + 1) - 2 + RANDOM % 5 )))
done
port=$(( 29700 + RANDOM % 1000 ))
two=("${base[@]}" --set fault.rejoin_timeout_s=60 --set "fault.buddy_copies=$KILL_COPIES"
     --nnodes 2 --rdzv "127.0.0.1:$port")
[[ $KILL_COPIES == off ]] && two+=(--set checkpoint.every=10)
export CONVEYOR_TOKEN=soak-$SEED
echo "soak: 2 processes (fault.buddy_copies $KILL_COPIES), node 1 killed at steps ${kill_steps[*]}" >&2
start=$SECONDS
"$BIN" train "${two[@]}" --node-rank 0 --out "$OUT/two" 2> "$OUT/two-node0.log" > /dev/null &
node0=$!
"$BIN" train "${two[@]}" --node-rank 1 2> "$OUT/two-node1-0.log" > /dev/null &
node1=$!
for ((k = 0; k < KILLS; ++k)); do
  want="step ${kill_steps[$k]}/$STEPS"
  # node 0 prints a progress line every STEPS/20 steps: wait for the first at or past it
  until grep -qE "^step ([0-9]+)/$STEPS" "$OUT/two-node0.log" &&
        (( $(grep -oE "^step [0-9]+/$STEPS" "$OUT/two-node0.log" | tail -1 | sed -E 's/step ([0-9]+).*/\1/') >= ${kill_steps[$k]} )); do
    kill -0 $node0 2>/dev/null || { echo "soak: node 0 ended before kill $((k + 1)) ($want)" >&2; break 2; }
    sleep 0.05
  done
  kill -9 $node1 2>/dev/null || true
  wait $node1 2>/dev/null || true
  "$BIN" train "${two[@]}" --node-rank 1 2> "$OUT/two-node1-$((k + 1)).log" > /dev/null &
  node1=$!
done
status0=0; wait $node0 || status0=$?
wait $node1 || true
elapsed=$(( SECONDS - start ))
grep -h '"event":"recovery"' "$OUT/two/metrics.jsonl" > "$OUT/two-recoveries.jsonl" 2>/dev/null || true
report_recoveries "$OUT/two-recoveries.jsonl"
echo "lost processes recovered: $(wc -l < "$OUT/two-recoveries.jsonl") of $KILLS ($summary, the" \
     "replacement's start-up included); node 0 exit $status0; ${elapsed} s"
if (( status0 == 0 )) && cmp -s "$OUT/reference/weights.safetensors" "$OUT/two/weights.safetensors"; then
  echo "weights (2 processes, node 1 killed $KILLS times): identical to the run without faults"
else
  echo "weights (2 processes): DIFFERENT or missing (see $OUT/two-node*.log)"
  exit 1
fi
fi
(( NOBUDDY > 0 )) || exit 0

# Two processes without buddy copies, supervised: the in-place faults of the one-process
# run (not its corrupted checkpoint), and node 1's process killed where node 0's was.
nobuddy_specs=()
for spec in "${specs[@]}"; do
  case $spec in
    corrupt-checkpoint:*) ;;
    exit:node=0:*) nobuddy_specs+=("exit:node=1:${spec#exit:node=0:}") ;;
    *) nobuddy_specs+=("$spec") ;;
  esac
done
nobuddy_inject=$(IFS=,; echo "${nobuddy_specs[*]}")
port=$(( 28700 + RANDOM % 1000 ))
wait_s=0; (( REJOIN > 0 )) && wait_s=60
nobuddy=("${common[@]}" --set fault.buddy_copies=off --set "checkpoint.writers=$WRITERS"
         --set "fault.inject=[$nobuddy_inject]" --set "fault.rejoin_timeout_s=$wait_s"
         --nnodes 2 --rdzv "127.0.0.1:$port" --out "$OUT/nobuddy" --supervise)
export CONVEYOR_TOKEN=soak-nobuddy-$SEED
echo "soak: 2 processes without buddy copies, supervised, checkpoint.writers $WRITERS," \
     "fault.rejoin_timeout_s $wait_s: $nobuddy_inject" >&2
start=$SECONDS
"$BIN" train "${nobuddy[@]}" --node-rank 0 2> "$OUT/nobuddy-node0.log" > /dev/null &
node0=$!
status1=0
"$BIN" train "${nobuddy[@]}" --node-rank 1 2> "$OUT/nobuddy-node1.log" > /dev/null || status1=$?
status0=0; wait $node0 || status0=$?
elapsed=$(( SECONDS - start ))
grep -h '"event":"recovery"' "$OUT"/nobuddy*/metrics.jsonl > "$OUT/nobuddy-recoveries.jsonl" 2>/dev/null || true
report_recoveries "$OUT/nobuddy-recoveries.jsonl"
restarts=$(grep -c "starting attempt" "$OUT/nobuddy-node0.log" || true)
resumed=$(grep -oE "resuming from [^ ]+" "$OUT/nobuddy-node0.log" | tail -1 || true)
rejoined=$(grep -oE "every stage loaded checkpoint [^)]+" "$OUT/nobuddy-node0.log" | tail -1 || true)
echo "recoveries: $(wc -l < "$OUT/nobuddy-recoveries.jsonl") ($summary); rejoins:" \
     "$(grep -c '"fault":"node"' "$OUT/nobuddy-recoveries.jsonl" || true) (${rejoined:-none});" \
     "whole-job restarts: $restarts (${resumed:-none}); node 0 exit $status0, node 1 exit $status1; ${elapsed} s"
if (( status0 == 0 && status1 == 0 )) &&
   cmp -s "$OUT/reference/weights.safetensors" "$OUT/nobuddy/weights.safetensors"; then
  echo "weights (2 processes without buddy copies): identical to the run without faults"
else
  echo "weights (2 processes without buddy copies): DIFFERENT or missing (see $OUT/nobuddy-node*.log)"
  exit 1
fi
