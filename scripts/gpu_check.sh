#!/usr/bin/env bash
# Runs on the GPU machine (see ../shared/GPU.md) over a checkout that carries .gpu/:
# CUDA kernel and stage-model tests, GPU determinism, the 1B reference GPT on one and two
# GPUs, and PyTorch's pipeline reference in the same call. Logs under $OUT; a short table
# at the end. Usage: scripts/gpu_check.sh [quick]
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
BIN=.gpu/conveyor
STEPS=${STEPS:-10}
declare -a rows

row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); echo "== $1: $2" >&2; }
json_field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d.get('$1'))"; }

nvidia-smi -L > "$OUT/gpus.txt" 2>&1; cat "$OUT/gpus.txt" >&2

# 1. kernels and the CUDA stage model against the CPU reference
timeout 200 .gpu/gpu_tests -s > "$OUT/gpu_tests.log" 2>&1
row "cuda tests" "$(grep -E '^\[doctest\] test cases' "$OUT/gpu_tests.log" | tail -1)"

# 2. GPU training is deterministic, and does not depend on the split
small=(--set devices.kind=cuda --set model.d_model=128 --set model.heads=2 --set model.vocab=512
       --set model.layers=4 --set train.steps=20 --set train.eval_every=10 --set pipeline.micro_batches=4)
timeout 120 $BIN train "${small[@]}" --set pipeline.stages=2 --set devices.ids=[0,1] --out "$OUT/small-a" > /dev/null 2> "$OUT/small-a.log"
timeout 120 $BIN train "${small[@]}" --set pipeline.stages=2 --set devices.ids=[0,1] --out "$OUT/small-b" > /dev/null 2> "$OUT/small-b.log"
timeout 120 $BIN train "${small[@]}" --set pipeline.stages=1 --set devices.ids=[0] --out "$OUT/small-1" > /dev/null 2> "$OUT/small-1.log"
same() { cmp -s "$1/weights.safetensors" "$2/weights.safetensors" && echo identical || echo DIFFERENT; }
row "small GPU run twice (2 GPUs)" "$(same "$OUT/small-a" "$OUT/small-b")"
row "small GPU run, 1 GPU vs 2 GPUs" "$(same "$OUT/small-a" "$OUT/small-1")"
row "small GPU final val_loss" "$(tail -1 "$OUT/small-a/metrics.jsonl" | json_field final_val_loss)"
[ "${1:-}" = quick ] && { printf '%s\n' "${rows[@]}"; exit 0; }

# 3. the reference GPT: conveyor on 2 GPUs and on 1 GPU (bench e2e: no weights written)
big() { # name, extra --set args...
  local name=$1; shift
  timeout 180 $BIN bench e2e configs/gpt-1b-2gpu.yaml --steps $STEPS --format json "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.log"
  row "conveyor $name tokens/s, GiB" "$(python3 -c "import json; d=json.load(open('$OUT/$name.json')); print(round(d['tokens_per_s']), round(d['tflops_per_gpu']), 'TFLOP/s', [round(x, 1) for x in d['peak_memory_gib']])" 2>/dev/null || echo failed)"
}
big 1f1b-2gpu
big zbh1-2gpu --set pipeline.schedule=zb-h1
big 1gpu --set pipeline.stages=1 --set devices.ids=[0]
big zbh1-2gpu-bf16 --set pipeline.schedule=zb-h1 --set optim.master=bf16
big 1f1b-2gpu-bf16 --set optim.master=bf16
big 1gpu-bf16 --set pipeline.stages=1 --set devices.ids=[0] --set optim.master=bf16

# 4. PyTorch's pipelining on the same model in the same call
torch_pp() { # name, MASTER, mode
  STEPS=6 WARM=3 MASTER=$2 timeout 150 python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
    .gpu/torch_pp_bench.py "$3" > "$OUT/torch-$1.json" 2> "$OUT/torch-$1.log"
  row "torch $1 tokens/s" "$(grep tokens_per_s "$OUT/torch-$1.json" | json_field tokens_per_s) $(grep peak "$OUT/torch-$1.json" | json_field rank0_peak_GiB) GiB"
}
torch_pp 1f1b-fp32 fp32 Schedule1F1B:1
torch_pp zbv-bf16 bf16 ScheduleZBVZeroBubble:2
torch_pp 1f1b-bf16 bf16 Schedule1F1B:1
for m in fp32 bf16; do
  STEPS=6 WARM=3 MASTER=$m timeout 120 python3 .gpu/torch_pp_bench.py single > "$OUT/torch-single-$m.json" 2> "$OUT/torch-single-$m.log"
  row "torch one GPU $m tokens/s" "$(grep tokens_per_s "$OUT/torch-single-$m.json" | json_field tokens_per_s)"
done

echo; printf '%s\n' "${rows[@]}"
