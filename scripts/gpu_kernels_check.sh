#!/usr/bin/env bash
# Runs the CUDA kernel tests (doctest TEST_CASEs named "cuda ...") on the GPU machine, one
# test case per process, and prints a table: result, seconds, name. Exit status 1 when any
# test fails (or none ran). Logs of failing tests are printed after the table.
#
# Usage: scripts/gpu_kernels_check.sh [path/to/gpu_tests]   (default build-cuda/tests/gpu_tests)
# Env:   SANITIZE=1  run each test under compute-sanitizer memcheck instead (API errors are
#                    not reported: the out-of-memory test provokes one on purpose).
#        VERBOSE=1   print every test's log (the measured errors against the tolerances).
#        FILTER='cuda attention*'  a doctest -tc pattern narrowing the set (no commas).
#        BENCH=1     then time every kernel (`conveyor bench kernels CONFIG --format json`, CONFIG
#                    default configs/gpt-1b-2gpu.yaml, CONVEYOR default .gpu/conveyor) and
#                    PyTorch's equivalents (.gpu/torch_kernels_bench.py) in this same call and
#                    print one table: kernel, conveyor ms, PyTorch ms, PyTorch / conveyor.
#                    BEFORE=path/to/older/conveyor adds that binary's column (a before/after).
set -u
BIN=${1:-build-cuda/tests/gpu_tests}
FILTER=${FILTER:-cuda *}
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.gpu/lib:/usr/local/cuda/lib64"
export NCCL_NVLS_ENABLE=0

if [[ ! -x "$BIN" ]]; then
  echo "gpu_kernels_check: no test binary at $BIN (build with: ninja -C build-cuda gpu_tests)" >&2
  exit 2
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "(nvidia-smi unavailable)"

mapfile -t cases < <("$BIN" --list-test-cases --no-version -tc="$FILTER" 2>/dev/null | grep '^cuda ')
if [[ ${#cases[@]} -eq 0 ]]; then
  echo "gpu_kernels_check: no test case matches '$FILTER' (was the binary built with CUDA?)" >&2
  exit 1
fi

logdir=$(mktemp -d)
pass=0 fail=0 skip=0
failed=()
printf '%-6s %8s  %s\n' result seconds "test case"
printf '%-6s %8s  %s\n' ------ -------- ---------
for i in "${!cases[@]}"; do
  name=${cases[$i]}
  log="$logdir/$i.log"
  start=$(date +%s.%N)
  if [[ "${SANITIZE:-0}" == 1 ]]; then
    compute-sanitizer --tool memcheck --report-api-errors no --require-cuda-init no \
      --error-exitcode 3 "$BIN" --no-version -tc="$name" >"$log" 2>&1
  else
    "$BIN" --no-version -tc="$name" >"$log" 2>&1
  fi
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  if [[ $rc -eq 0 ]] && grep -q 'skipped: no GPU' "$log"; then
    result=SKIP; skip=$((skip + 1))
  elif [[ $rc -eq 0 ]]; then
    result=PASS; pass=$((pass + 1))
  else
    result=FAIL; fail=$((fail + 1)); failed+=("$i")
  fi
  printf '%-6s %8.2f  %s\n' "$result" "$secs" "$name"
  if [[ "${VERBOSE:-0}" == 1 ]]; then grep -E 'MESSAGE|scaled error' "$log" | sed 's/^/         /'; fi
done
echo "passed $pass, failed $fail, skipped (no GPU) $skip of ${#cases[@]}"
for i in "${failed[@]}"; do
  echo
  echo "=== FAIL: ${cases[$i]}"
  tail -n 60 "$logdir/$i.log"
done
rm -rf "$logdir"

if [[ "${BENCH:-0}" == 1 ]]; then
  config=${CONFIG:-configs/gpt-1b-2gpu.yaml}
  bench=$(mktemp -d)
  "${CONVEYOR:-.gpu/conveyor}" bench kernels "$config" --format json >"$bench/after.json" \
    || echo "gpu_kernels_check: conveyor bench kernels failed" >&2
  if [[ -n "${BEFORE:-}" ]]; then
    "$BEFORE" bench kernels "$config" --format json >"$bench/before.json" \
      || echo "gpu_kernels_check: $BEFORE bench kernels failed" >&2
  fi
  python3 .gpu/torch_kernels_bench.py >"$bench/torch.json" \
    || echo "gpu_kernels_check: torch_kernels_bench.py failed" >&2
  python3 - "$bench" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(name):
    path = os.path.join(d, name)
    try:
        with open(path) as f:
            return {r["kernel"]: r["ms"] for r in json.load(f)["kernels"]}
    except (OSError, ValueError, KeyError):
        return None
after, before, torch = load("after.json"), load("before.json"), load("torch.json") or {}
if after is None:
    sys.exit(0)
head = ["kernel"] + (["before ms"] if before else []) + ["ms", "PyTorch ms", "PyTorch / conveyor"]
print()
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for name, ms in after.items():
    t = torch.get(name)
    row = [name] + ([f"{before[name]:.4f}" if name in before else "-"] if before else [])
    row += [f"{ms:.4f}", f"{t:.4f}" if t else "-", f"{t / ms:.2f}" if t else "-"]
    print("| " + " | ".join(row) + " |")
PY
  rm -rf "$bench"
fi
[[ $fail -eq 0 && $pass -gt 0 ]]
