#!/usr/bin/env bash
# Runs on the two-GPU machine (README, "GPU") over a checkout that carries
# .gpu-p2p/ (conveyor, nccl_gpu_tests, nccl_p2p built from ../shared/bench/nccl_p2p.cu,
# lib/): the NCCL channel's GPU tests, `conveyor bench p2p` for the GPU transports (each
# channel against its raw library in the same run), and the shared raw reference.
# Logs under $OUT; a short table at the end. Usage: scripts/gpu_p2p_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
D=.gpu-p2p
export LD_LIBRARY_PATH=$PWD/$D/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_p2p_check}
mkdir -p "$OUT"
export NCCL_DEBUG=${NCCL_DEBUG:-WARN} NCCL_DEBUG_FILE=$OUT/nccl.%h.%p.log  # not on stdout
declare -a rows
row() { rows+=("$(printf '%-34s %s' "$1" "$2")"); echo "== $1: $2" >&2; }

{ nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/gpus.txt" 2>&1; head -3 "$OUT/gpus.txt" >&2
ldd $D/conveyor | grep 'not found' >&2

# 1. the NCCL channel: bitwise transfers, both directions, bounded waits. One process per
#    test case, each under its own limit, so that a hang costs one case, not the rest.
$D/nccl_gpu_tests --list-test-cases --no-version | grep '^gpu' > "$OUT/cases.txt"
i=0
while read -r name; do
  i=$((i + 1))
  timeout 60 $D/nccl_gpu_tests -s --no-version -tc="$name" > "$OUT/nccl_test_$i.log" 2>&1
  rc=$?
  row "test $i (rc $rc)" "$name: $(grep -E '^\[doctest\] test cases' "$OUT/nccl_test_$i.log" | tail -1 | cut -c23-)"
  grep -h 'skipped' "$OUT/nccl_test_$i.log" >&2
done < "$OUT/cases.txt"

# 2. bench p2p: each GPU channel against its raw library, same process, same run
for t in nccl cuda-peer ucx; do
  timeout 150 $D/conveyor bench p2p --transport $t --format json > "$OUT/p2p-$t.json" 2> "$OUT/p2p-$t.log"
  row "bench p2p $t (rc $?)" "$(wc -c < "$OUT/p2p-$t.json") bytes of JSON; $(tail -1 "$OUT/p2p-$t.log")"
done

# 3. the shared raw reference (one thread, ncclCommInitAll), as GPU.md's figures
timeout 60 $D/nccl_p2p > "$OUT/nccl_p2p.jsonl" 2> "$OUT/nccl_p2p.log"
row "raw reference nccl_p2p (rc $?)" "$(wc -l < "$OUT/nccl_p2p.jsonl") sizes"

# Few files come back from the GPU machine: the logs travel as one archive.
(cd "$OUT" && tar czf logs.tgz --remove-files cases.txt gpus.txt nccl*.log* p2p-*.log)
echo; printf '%s\n' "${rows[@]}"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
print(f"{'transport':<10} {'size':>7} {'chan us':>9} {'GB/s':>7} {'raw us':>9} {'GB/s':>7} {'ratio':>6} {'sync us':>8} {'raw sync':>8} {'x raw':>6}")
for t in ("nccl", "cuda-peer", "ucx"):
    try:
        d = json.load(open(os.path.join(out, f"p2p-{t}.json")))
    except Exception as e:
        print(f"{t:<10} no result ({e})"); continue
    for r in d["results"]:
        b = r["bytes"]; size = f"{b>>20}MiB" if b >= 1 << 20 else f"{b>>10}KiB"
        print(f"{t:<10} {size:>7} {r['channel_us']:>9.1f} {r['channel_gbs']:>7.1f} {r['raw_us']:>9.1f} {r['raw_gbs']:>7.1f} {r['ratio']:>6.3f} {r.get('channel_sync_us', 0):>8.1f} {r.get('raw_sync_us', 0):>8.1f} {r.get('sync_ratio', 0):>6.2f}")
try:
    for line in open(os.path.join(out, "nccl_p2p.jsonl")):
        r = json.loads(line)
        print(f"ref nccl_p2p {r['bytes']:>10} B: nccl {r['pipelined_us']} us {r['GBps']} GB/s, sync {r['sync_us']} us; peer {r['memcpy_peer_us']} us {r['memcpy_peer_GBps']} GB/s")
except Exception as e:
    print("ref nccl_p2p: no result", e)
PY
