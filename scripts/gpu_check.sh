#!/usr/bin/env bash
# Runs on the GPU machine (README, "GPU") over a checkout that carries .gpu/:
# CUDA kernel and stage-model tests, GPU determinism, the 1B reference GPT on one and two
# GPUs, and PyTorch's pipeline reference in the same call. Logs under $OUT; a short table
# at the end. Usage: scripts/gpu_check.sh [quick]
# Env: SECTIONS (default "tests determinism kernels model pipeline schedules trace torch torchpp") picks
#      what runs (torch: PyTorch on one GPU; torchpp: its pipeline schedules on two;
#      multiproc, not in the default: GPU stages in two processes over NCCL;
#      p2p: bench p2p of cuda-peer and NCCL; snapshots: the cost of in-memory snapshots;
#      dataparallel: 2 replicas x 1 stage over NCCL against one GPU;
#      gradbf16: 1F1B and ZBV with bf16 gradients; recompute: model.recompute's memory
#      and time on one GPU; replicarestart: GPU replica crash recovery, bitwise and timed;
#      attention: runtime.attention cudnn against kernels, per kernel and end to end;
#      ab: BEFORE=<an earlier build's conveyor> against this one, kernels (AB_KERNELS=0
#      skips them) and one GPU, AB_ROUNDS alternated rounds of each of AB_SCHEDULES
#      (default 1f1b);
#      onegpu: one GPU's figures and the half-block cut on one GPU (when one is lent);
#      fp8: precision.matmul fp8 against bf16 on one GPU (GPT-1B 1F1B and ZBV, Llama-1B;
#      dynamic and delayed scaling; FP8_UNFUSED=1 (default) adds the same runs with
#      precision.fp8_fused_casts false) and PyTorch's compiled bf16 and FP8 GPT in the same call;
#      fp8curve: bf16 and fp8 loss curves of the 1B GPT over CURVE_STEPS (300) steps of the
#      Python standard library's source, eval every CURVE_EVAL (50), drawn;
#      llamaprof: where a Llama-1B step's time goes (bench kernels on both attention
#      backends, an nsys kernel summary where nsys exists, e2e cudnn/kernels/non-deterministic);
#      llama: configs/llama-1b.yaml on one GPU (fp32 master, and all-bf16) against
#      transformers' LlamaForCausalLM (.gpu/torch_llama_bench.py, eager and COMPILE=1, bf16)
#      in the same call, and a small Llama's GPU determinism;
#      targets: issue 8's ratio table on two GPUs, PyTorch in the same call, with ZBV on
#      whole blocks and on HALF_PARTITION, default [6,6,6.5,5.5]: cut between halves, and
#      a traced ZBV run on that cut unless TARGETS_TRACE=0);
#      TORCH_RUNS: PyTorch pipeline runs as name:MASTER:Schedule:chunks (default: three).
#      TARGETS_TORCH=0 skips its PyTorch runs. (Its two-stage rows need two GPUs: a
#      config may not name one device twice. Every run's config is checked on the CPU by
#      `conveyor sched configs/gpt-1b-2gpu.yaml` with the same --set arguments.)
#      STEPS (default 10) steps per training benchmark.
# Carry in .gpu/lib, besides CAF, yaml-cpp and spdlog: libgloo.so.0 and libhiredis.so.0.14
# (the host gradient all-reduce of parallel.data; the GPU machine has neither).
set -uo pipefail
cd "$(dirname "$0")/.."
source .gpu/env.sh  # the carried libraries (gpu_package.sh), NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
BIN=${BIN:-.gpu/conveyor}
STEPS=${STEPS:-10}
SECTIONS=${SECTIONS:-tests determinism kernels model pipeline schedules trace torch torchpp}
declare -a rows
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); echo "== [${SECONDS}s] $1: $2" >&2; }
json_field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d.get('$1'))"; }

nvidia-smi -L > "$OUT/gpus.txt" 2>&1; cat "$OUT/gpus.txt" >&2

# 1. kernels and the CUDA stage model against the CPU reference
if want tests; then
  # Line-buffered and killed outright at the limit: a suite that overruns leaves its log up
  # to the test it was in (doctest's own SIGTERM handler could hang, and stdout to a file
  # is block-buffered), and the later sections still run.
  timeout -s KILL 300 stdbuf -oL .gpu/gpu_tests -s > "$OUT/gpu_tests.log" 2>&1
  row "cuda tests" "$(grep -E '^\[doctest\] test cases' "$OUT/gpu_tests.log" | tail -1)"
  timeout -s KILL 300 stdbuf -oL .gpu/gpu_pipeline_tests -s > "$OUT/gpu_pipeline_tests.log" 2>&1
  row "gpu pipeline tests (2 GPUs vs CPU)" "$(grep -E '^\[doctest\] test cases' "$OUT/gpu_pipeline_tests.log" | tail -1)"
  # NCCL edges and the stage groups' all-reduce (present when carried in .gpu/)
  for t in nccl_gpu_tests collective_gpu_tests; do
    [ -x .gpu/$t ] || continue
    timeout 200 .gpu/$t -s > "$OUT/$t.log" 2>&1
    row "$t" "$(grep -E '^\[doctest\] test cases' "$OUT/$t.log" | tail -1)"
  done
fi

# 2. GPU training is deterministic, and does not depend on the split
if want determinism; then
  small=(--set devices.kind=cuda --set model.d_model=128 --set model.heads=2 --set model.vocab=512
         --set model.layers=4 --set train.steps=20 --set train.eval_every=10 --set pipeline.micro_batches=4)
  timeout 120 $BIN train "${small[@]}" --set pipeline.stages=2 --set devices.ids=[0,1] --out "$OUT/small-a" > /dev/null 2> "$OUT/small-a.log"
  timeout 120 $BIN train "${small[@]}" --set pipeline.stages=2 --set devices.ids=[0,1] --out "$OUT/small-b" > /dev/null 2> "$OUT/small-b.log"
  timeout 120 $BIN train "${small[@]}" --set pipeline.stages=1 --set devices.ids=[0] --out "$OUT/small-1" > /dev/null 2> "$OUT/small-1.log"
  same() { cmp -s "$1/weights.safetensors" "$2/weights.safetensors" && echo identical || echo DIFFERENT; }
  row "small GPU run twice (2 GPUs)" "$(same "$OUT/small-a" "$OUT/small-b")"
  row "small GPU run, 1 GPU vs 2 GPUs" "$(same "$OUT/small-a" "$OUT/small-1")"
  row "small GPU final val_loss" "$(tail -1 "$OUT/small-a/metrics.jsonl" | json_field final_val_loss)"
fi
[ "${1:-}" = quick ] && { printf '%s\n' "${rows[@]}"; exit 0; }

# 3. the reference GPT: conveyor on 2 GPUs and on 1 GPU (bench e2e: no weights written)
big() { # name, extra --set args... (the all-reduce figures appear for data-parallel runs)
  local name=$1; shift
  timeout 240 $BIN bench e2e ${BIG_CONFIG:-configs/gpt-1b-2gpu.yaml} --steps $STEPS --format json "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.log"
  row "conveyor $name tokens/s, GiB" "$(python3 -c "import json; d=json.load(open('$OUT/$name.json')); print(round(d['tokens_per_s']), round(d['tflops_per_gpu']), 'TFLOP/s, reserved', [round(x, 1) for x in d['peak_memory_gib']], 'allocated', [round(x, 2) for x in d.get('peak_allocated_gib', [])], *(['allreduce', round(d['allreduce_ms'], 2), 'ms, exposed', round(d['allreduce_exposed_ms'], 2), 'ms, hidden', round(d['allreduce_hidden'], 3)] if 'allreduce_ms' in d else []))" 2>/dev/null || echo failed)"
}
# 3a. every kernel at the reference shapes, conveyor's and PyTorch's
if want kernels; then
  timeout 240 $BIN bench kernels configs/gpt-1b-2gpu.yaml --format json > "$OUT/kernels.json" 2> "$OUT/kernels.log"
  timeout 240 python3 .gpu/torch_kernels_bench.py > "$OUT/torch-kernels.json" 2> "$OUT/torch-kernels.log"
  python3 - "$OUT/kernels.json" "$OUT/torch-kernels.json" > "$OUT/kernels.txt" 2>&1 <<'PY'
import json, sys
ours = json.load(open(sys.argv[1]))
try:
    torch = {r["kernel"]: r["ms"] for r in json.load(open(sys.argv[2]))["kernels"]}
except Exception as e:
    torch = {}
print(f"{'kernel':<44} {'ms':>8} {'rate':>12} {'ceil':>5} {'torch ms':>9} {'ratio':>6} {'ms/step':>8}")
for r in ours["kernels"]:
    rate = f"{r['tflops']:.0f} TF/s" if "tflops" in r else f"{r['tbps']:.2f} TB/s"
    t = next((v for k, v in torch.items() if r["kernel"].startswith(k) or k.startswith(r["kernel"].split(" (")[0])), None)
    ratio = f"{t / r['ms']:.2f}" if t else "-"
    print(f"{r['kernel']:<44} {r['ms']:8.3f} {rate:>12} {100*r['ceiling_share']:4.0f}% {t if t else float('nan'):9.3f} {ratio:>6} {r['ms_per_step']:8.1f}")
print(f"kernel time per train step on one GPU: {ours['kernel_ms_per_step_one_gpu']:.1f} ms")
for k, v in torch.items():
    print(f"torch {k:<44} {v:8.3f} ms")
PY
  cat "$OUT/kernels.txt" >&2
  row "kernel ms per step (one GPU, sum)" "$(python3 -c "import json; print(round(json.load(open('$OUT/kernels.json'))['kernel_ms_per_step_one_gpu'], 1))" 2>/dev/null || echo failed)"
fi

# 3b. one GPU (gradient accumulation) and the pipeline, conveyor bench model
if want model; then
  for m in ${MASTERS:-bf16 fp32}; do
    timeout 300 $BIN bench model configs/gpt-1b-2gpu.yaml --steps $STEPS --format json --set optim.master=$m \
      --set pipeline.schedule=zb-h1 > "$OUT/model-$m.json" 2> "$OUT/model-$m.log"
    row "conveyor model $m: 1 GPU, 2 GPU zb-h1, eff." "$(python3 -c "import json; d=json.load(open('$OUT/model-$m.json')); print(round(d['one_device']['tokens_per_s']), round(d['pipeline']['tokens_per_s']), round(d['pipeline_efficiency'], 3), [round(x, 1) for x in d['pipeline']['peak_memory_gib']])" 2>/dev/null || echo failed)"
  done
fi

if want pipeline; then
  big 1f1b-2gpu
  big 1f1b-2gpu-bf16 --set optim.master=bf16
fi

# 3d. a traced 1B run: actions carry device times (CUDA events), so the busy share per
#     GPU is the device's (host enqueue times would give a few percent), and the trace's
#     bubble sits beside the simulator's for the same durations
if want trace; then
  timeout 200 $BIN train configs/gpt-1b-2gpu.yaml --set train.steps=4 --set optim.master=bf16 \
    --set pipeline.schedule=zb-h1 --set trace.enabled=true --out "$OUT/traced" > /dev/null 2> "$OUT/traced.log"
  timeout 60 $BIN trace summary "$OUT/traced" --format json > "$OUT/trace-summary.json" 2>> "$OUT/traced.log"
  timeout 60 $BIN trace export "$OUT/traced" --chrome "$OUT/traced.json" 2>> "$OUT/traced.log" && gzip -f "$OUT/traced.json"
  row "traced 1B zb-h1: busy per GPU, bubble, sim." "$(python3 -c "import json; d=json.load(open('$OUT/trace-summary.json')); print([round(s['busy_fraction'], 3) for s in d['per_stage']], round(d['bubble'], 3), round(d['simulated_bubble'], 3))" 2>/dev/null || echo failed)"
  rm -rf "$OUT/traced/trace" "$OUT/traced/weights.safetensors"
fi

# 3c. the schedules with two chunks per GPU (the simulator predicts zbv ~5% ahead of zb-h1)
if want schedules; then
  big zbv-2gpu-bf16 --set optim.master=bf16 --set pipeline.schedule=zbv
  big zbv-2gpu --set pipeline.schedule=zbv
  big interleaved-2gpu-bf16 --set optim.master=bf16 --set pipeline.schedule=interleaved-1f1b --set pipeline.virtual_stages=2
fi

# 3b. GPU stages in two processes (NCCL between them, 1 GPU each) train to the weights of
#     one process driving both GPUs (cuda-peer), in deterministic mode. MP_BIN picks the
#     binary (default $BIN), e.g. MP_BIN=.gpu-nccl/conveyor with that folder's lib/ on
#     LD_LIBRARY_PATH.
# 7. tensor channels against their raw libraries (issue 5's targets: >= 0.95 of raw)
if want p2p; then
  for t in cuda-peer nccl; do
    timeout 200 $BIN bench p2p --transport $t --sizes 8KiB,16MiB,64MiB --repeats 7 > "$OUT/p2p-$t.txt" 2>&1
    row "p2p $t (ratio to raw at 16/64 MiB)" "$(grep -E '^[a-z-]+ +(16|64)MiB' "$OUT/p2p-$t.txt" | awk '{print $2"="$7}' | tr '\n' ' ')"
  done
fi

# 8. what fault.policy restart's in-memory snapshots cost on the reference GPT: the same
#    bench with a snapshot after every step and with none (the config's 25 is in between)
if want snapshots; then
  big zbv-bf16-nosnap --set pipeline.schedule=zbv --set optim.master=bf16 --set fault.snapshot_every=0
  big zbv-bf16-snap1 --set pipeline.schedule=zbv --set optim.master=bf16 --set fault.snapshot_every=1
  big zbv-fp32-nosnap --set pipeline.schedule=zbv --set fault.snapshot_every=0
  big zbv-fp32-snap1 --set pipeline.schedule=zbv --set fault.snapshot_every=1
fi

# 9. bf16 gradient accumulation (optim.grad_dtype bf16, the PyTorch reference's recipe):
#     peak memory of the first stage against PyTorch's 1F1B, and throughput
if want gradbf16; then
  big 1f1b-2gpu-bf16-bf16grads --set optim.master=bf16 --set optim.grad_dtype=bf16
  big zbv-2gpu-bf16-bf16grads --set optim.master=bf16 --set optim.grad_dtype=bf16 --set pipeline.schedule=zbv
fi

# 10. data parallelism (issue 9): 2 replicas x 1 stage over NCCL against one GPU with the
#    same global batch; the all-reduce's own time, what stayed exposed, the share hidden
if want dataparallel; then
  for m in ${MASTERS:-bf16 fp32}; do
    big dp-1gpu-$m --set pipeline.stages=1 --set devices.ids=[0] --set optim.master=$m
    big dp-r2-$m --set pipeline.stages=1 --set devices.ids=[0,1] --set parallel.data=2 --set fault.policy=abort --set optim.master=$m
    row "R=2 x P=1 $m: scaling efficiency vs 2 x 1 GPU" "$(python3 -c "import json; a=json.load(open('$OUT/dp-1gpu-$m.json'))['tokens_per_s']; b=json.load(open('$OUT/dp-r2-$m.json'))['tokens_per_s']; print(round(b / (2 * a), 3))" 2>/dev/null || echo failed)"
  done
fi

# 11. model.recompute on one GPU under GPipe (every micro-batch's stash held at once): the
#     peak memory and the time it costs, all-bf16 with bf16 gradients
if want recompute; then
  for r in none attention full; do
    big recompute-$r --set pipeline.stages=1 --set devices.ids=[0] --set pipeline.schedule=gpipe \
      --set optim.master=bf16 --set optim.grad_dtype=bf16 --set model.recompute=$r
  done
fi

# 12. GPU replica recovery (2 GPUs): R=2 x P=1 over NCCL, a crash on each GPU in turn
#     against the fault-free run; the recovery time shows whether the survivor's bucket
#     wait was cancelled (GroupCancellation) or ran to transport.timeout_s (10 s here)
if want replicarestart; then
  rr=(--set devices.kind=cuda --set model.d_model=128 --set model.heads=2 --set model.vocab=512
      --set model.layers=4 --set train.steps=12 --set train.eval_every=0 --set pipeline.micro_batches=4
      --set pipeline.stages=1 --set parallel.data=2 --set devices.ids=[0,1] --set transport.timeout_s=10)
  timeout 120 $BIN train "${rr[@]}" --out "$OUT/rr-clean" > /dev/null 2> "$OUT/rr-clean.log"
  for fault in crash:stage=1:step=5 crash:stage=0:step=7; do
    name=rr-${fault//[:=]/-}
    timeout 120 $BIN train "${rr[@]}" --set "fault.inject=[$fault]" --out "$OUT/$name" > /dev/null 2> "$OUT/$name.log"
    row "GPU replicas, $fault" "$(cmp -s "$OUT/rr-clean/weights.safetensors" "$OUT/$name/weights.safetensors" && echo identical || echo DIFFERENT), $(grep '"recovery"' "$OUT/$name/metrics.jsonl" | python3 -c "import json,sys; r=[json.loads(l) for l in sys.stdin]; print(', '.join(f\"{x['restored_from']} in {x['recovery_ms']:.0f} ms\" for x in r) or 'no recovery')" 2>/dev/null)"
  done
fi

# 13. runtime.attention: cuDNN's fused attention against conveyor's own kernels, the
#     attention rows of bench kernels and one GPU end to end both ways (all-bf16)
if want attention; then
  for a in kernels cudnn; do
    timeout 240 $BIN bench kernels configs/gpt-1b-2gpu.yaml --format json --set runtime.attention=$a \
      > "$OUT/kernels-attention-$a.json" 2> "$OUT/kernels-attention-$a.log"
    row "attention $a fwd, bwd ms; kernel ms/step" "$(python3 -c "import json; d=json.load(open('$OUT/kernels-attention-$a.json')); r={x['kernel']: x['ms'] for x in d['kernels']}; print(round(r['attention forward (causal)'], 4), round(r['attention backward (causal)'], 4), round(d['kernel_ms_per_step_one_gpu'], 1))" 2>/dev/null || echo failed)"
  done
  for a in kernels cudnn; do
    big onegpu-attention-$a --set pipeline.stages=1 --set devices.ids=[0] --set pipeline.schedule=1f1b \
      --set optim.master=bf16 --set optim.grad_dtype=bf16 --set runtime.attention=$a
  done
fi

# 13b. the Llama family on one GPU, transformers in the same call (issue 42, item 8)
if want llama; then
  BIG_CONFIG=configs/llama-1b.yaml big llama1b-fp32master
  BIG_CONFIG=configs/llama-1b.yaml big llama1b-bf16 --set optim.master=bf16 --set optim.grad_dtype=bf16
  for compile in 0 1; do
    STEPS=6 WARM=3 MASTER=bf16 COMPILE=$compile timeout 300 python3 .gpu/torch_llama_bench.py \
      > "$OUT/torch-llama-compile$compile.json" 2> "$OUT/torch-llama-compile$compile.log"
    row "torch llama-1b bf16 compile=$compile tokens/s" "$(tail -1 "$OUT/torch-llama-compile$compile.json" | json_field tokens_per_s) $(tail -1 "$OUT/torch-llama-compile$compile.json" | json_field tflops_per_gpu) TFLOP/s"
  done
  row "llama-1b conveyor bf16 / torch's better" "$(python3 - "$OUT" <<'PY' 2>&1
import json, sys
o = sys.argv[1]
ours = json.load(open(f"{o}/llama1b-bf16.json"))["tokens_per_s"]
theirs = max(json.loads(open(f"{o}/torch-llama-compile{c}.json").read().strip().splitlines()[-1])["tokens_per_s"] for c in (0, 1))
print(round(ours / theirs, 3))
PY
)"
  small=(--set devices.kind=cuda --set model.arch=llama --set model.d_model=256 --set model.heads=4
         --set model.kv_heads=2 --set model.ffn_dim=512 --set model.vocab=512 --set model.layers=4
         --set train.steps=12 --set train.eval_every=0 --set pipeline.micro_batches=4
         --set devices.ids=[0] --set runtime.deterministic=true)
  timeout 120 $BIN train "${small[@]}" --set pipeline.stages=1 --out "$OUT/llama-small-a" > /dev/null 2> "$OUT/llama-small-a.log"
  timeout 120 $BIN train "${small[@]}" --set pipeline.stages=1 --out "$OUT/llama-small-b" > /dev/null 2> "$OUT/llama-small-b.log"
  timeout 120 $BIN train "${small[@]}" --set pipeline.stages=1 --set pipeline.schedule=zbv --set "pipeline.partition=[2.5,1.5]" \
    --out "$OUT/llama-small-cut" > /dev/null 2> "$OUT/llama-small-cut.log"
  row "small GPU llama twice" "$(cmp -s "$OUT/llama-small-a/weights.safetensors" "$OUT/llama-small-b/weights.safetensors" && echo identical || echo DIFFERENT)"
  row "small GPU llama 1f1b vs zbv [2.5,1.5]" "$(cmp -s "$OUT/llama-small-a/weights.safetensors" "$OUT/llama-small-cut/weights.safetensors" && echo identical || echo DIFFERENT)"
  row "small GPU llama final val_loss" "$(tail -1 "$OUT/llama-small-a/metrics.jsonl" | json_field final_val_loss)"
fi

# 13a. where a Llama-1B step's time goes: every kernel at its shapes (bench kernels, both
#      attention backends) and, where Nsight Systems is installed, the kernels of a real
#      all-bf16 step summed by name (the top of the list in $OUT/llamaprof-kernels.txt)
if want llamaprof; then
  for att in cudnn kernels; do
    timeout 240 $BIN bench kernels configs/llama-1b.yaml --format json --set runtime.attention=$att \
      > "$OUT/llama-kernels-$att.json" 2> "$OUT/llama-kernels-$att.log"
    python3 - "$OUT/llama-kernels-$att.json" > "$OUT/llama-kernels-$att.txt" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{'kernel':<52} {'ms':>8} {'rate':>12} {'ceil':>5} {'ms/step':>8}")
for r in d["kernels"]:
    rate = f"{r['tflops']:.0f} TF/s" if "tflops" in r else f"{r['tbps']:.2f} TB/s"
    print(f"{r['kernel']:<52} {r['ms']:8.3f} {rate:>12} {100*r['ceiling_share']:4.0f}% {r['ms_per_step']:8.1f}")
print(f"kernel time per train step on one GPU: {d['kernel_ms_per_step_one_gpu']:.1f} ms")
PY
    row "llama kernels ($att): ms per step (sum)" "$(tail -1 "$OUT/llama-kernels-$att.txt")"
  done
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  if [ -n "$NSYS" ]; then
    timeout 300 "$NSYS" profile -t cuda -o "$OUT/llama-e2e" --force-overwrite true $BIN bench e2e configs/llama-1b.yaml \
      --steps 4 --set optim.master=bf16 --set optim.grad_dtype=bf16 --format json > "$OUT/llama-nsys-e2e.json" 2> "$OUT/llama-nsys.log"
    "$NSYS" stats -r cuda_gpu_kern_sum -f csv -o "$OUT/llama-kern" "$OUT/llama-e2e.nsys-rep" >> "$OUT/llama-nsys.log" 2>&1
    python3 - "$OUT"/llama-kern*.csv > "$OUT/llamaprof-kernels.txt" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
total = sum(float(r["Total Time (ns)"]) for r in rows)
print(f"all kernels: {total / 1e6:.1f} ms over the profiled run")
for r in rows[:40]:
    print(f"{float(r['Time (%)']):5.1f}% {float(r['Total Time (ns)']) / 1e6:9.1f} ms {int(r['Instances']):6d}x  {r['Name'][:110]}")
PY
    rm -f "$OUT/llama-e2e.nsys-rep" "$OUT"/llama-e2e.sqlite
    row "llama nsys: kernel ms over 4+warm-up steps" "$(head -1 "$OUT/llamaprof-kernels.txt")"
  else
    row "llama nsys" "not installed"
  fi
  BIG_CONFIG=configs/llama-1b.yaml big llama1b-bf16-cudnn --set optim.master=bf16 --set optim.grad_dtype=bf16
  BIG_CONFIG=configs/llama-1b.yaml big llama1b-bf16-kernels --set optim.master=bf16 --set optim.grad_dtype=bf16 \
    --set runtime.attention=kernels
  BIG_CONFIG=configs/llama-1b.yaml big llama1b-bf16-nondet --set optim.master=bf16 --set optim.grad_dtype=bf16 \
    --set runtime.deterministic=false
fi

# 13b. precision.matmul fp8 against bf16 on one GPU (issue 43): conveyor's GPT-1B with one
#      stage (1F1B and ZBV) and Llama-1B, both all-bf16 otherwise, and PyTorch's compiled
#      bf16 and FP8 (torch._scaled_mm, tensorwise dynamic scaling) GPT in the same call
if want fp8; then
  one=(--set optim.master=bf16 --set optim.grad_dtype=bf16 --set pipeline.stages=1 --set devices.ids=[0])
  big fp8-gpt-bf16 "${one[@]}" --set pipeline.schedule=1f1b
  big fp8-gpt-fp8 "${one[@]}" --set pipeline.schedule=1f1b --set precision.matmul=fp8
  big fp8-gpt-fp8-zbv "${one[@]}" --set pipeline.schedule=zbv --set precision.matmul=fp8
  big fp8-gpt-fp8-delayed "${one[@]}" --set pipeline.schedule=1f1b --set precision.matmul=fp8 \
    --set precision.fp8_scaling=delayed
  BIG_CONFIG=configs/llama-1b.yaml big fp8-llama-bf16 --set optim.master=bf16 --set optim.grad_dtype=bf16
  BIG_CONFIG=configs/llama-1b.yaml big fp8-llama-fp8 --set optim.master=bf16 --set optim.grad_dtype=bf16 --set precision.matmul=fp8
  BIG_CONFIG=configs/llama-1b.yaml big fp8-llama-fp8-delayed --set optim.master=bf16 --set optim.grad_dtype=bf16 \
    --set precision.matmul=fp8 --set precision.fp8_scaling=delayed
  # the casts fused into GELU/SwiGLU (precision.fp8_fused_casts) against the same runs without
  if [ "${FP8_UNFUSED:-1}" = 1 ]; then
    big fp8-gpt-fp8-unfused "${one[@]}" --set pipeline.schedule=1f1b --set precision.matmul=fp8 \
      --set precision.fp8_fused_casts=false
    big fp8-gpt-fp8-delayed-unfused "${one[@]}" --set pipeline.schedule=1f1b --set precision.matmul=fp8 \
      --set precision.fp8_scaling=delayed --set precision.fp8_fused_casts=false
    BIG_CONFIG=configs/llama-1b.yaml big fp8-llama-fp8-unfused --set optim.master=bf16 --set optim.grad_dtype=bf16 \
      --set precision.matmul=fp8 --set precision.fp8_fused_casts=false
    row "fp8 fused/unfused: gpt dynamic, delayed; llama" "$(python3 - "$OUT" <<'PY' 2>&1
import json, sys
o = sys.argv[1]
tps = lambda n: json.load(open(f"{o}/{n}.json"))["tokens_per_s"]
print(*(round(tps(f) / tps(f + "-unfused"), 3) for f in ("fp8-gpt-fp8", "fp8-gpt-fp8-delayed", "fp8-llama-fp8")))
PY
)"
  fi
  for ref in compiled:0 fp8:1; do
    STEPS=6 WARM=3 MASTER=bf16 COMPILE=1 FP8=${ref#*:} timeout 300 python3 .gpu/torch_pp_bench.py single \
      > "$OUT/torch-single-${ref%:*}.json" 2> "$OUT/torch-single-${ref%:*}.log"
    row "torch one GPU bf16 ${ref%:*} tokens/s" "$(grep tokens_per_s "$OUT/torch-single-${ref%:*}.json" | json_field tokens_per_s)"
  done
  row "fp8: gpt/bf16, /torch fp8, /torch bf16; llama/bf16; delayed" "$(python3 - "$OUT" <<'PY' 2>&1
import json, sys
o = sys.argv[1]
tps = lambda n: json.load(open(f"{o}/{n}.json"))["tokens_per_s"]
torch = lambda n: [json.loads(l) for l in open(f"{o}/torch-single-{n}.json") if "tokens_per_s" in l][-1]["tokens_per_s"]
print(round(tps("fp8-gpt-fp8") / tps("fp8-gpt-bf16"), 3), round(tps("fp8-gpt-fp8") / torch("fp8"), 3),
      round(tps("fp8-gpt-fp8") / torch("compiled"), 3), round(tps("fp8-llama-fp8") / tps("fp8-llama-bf16"), 3),
      "delayed/bf16", round(tps("fp8-gpt-fp8-delayed") / tps("fp8-gpt-bf16"), 3),
      "delayed/torch bf16", round(tps("fp8-gpt-fp8-delayed") / torch("compiled"), 3),
      "llama delayed/bf16", round(tps("fp8-llama-fp8-delayed") / tps("fp8-llama-bf16"), 3))
PY
)"
fi

# 13c. the loss curve under fp8 (issue 43): the 1B GPT on one GPU, all-bf16 otherwise, bf16
#      and fp8 (dynamic, and delayed when FP8_DELAYED=1) from the same seed for CURVE_STEPS
#      (default 300) steps on the corpus, evaluated every 50; scripts/loss_curves.py
#      compares them (smoothed over 20 steps) and draws $OUT/fp8-curve.svg
if want fp8curve; then
  # Real text without a download: the GPU machine's Python standard library source (tests
  # excluded, in a fixed order), about 10 MB of bytes, under one epoch in 300 steps.
  corpus=$OUT/pystdlib.txt
  find /usr/lib/python3.12 -name '*.py' -not -path '*/test/*' -not -path '*/site-packages/*' |
    LC_ALL=C sort | xargs cat | head -c 20000000 > "$corpus"
  curve=(--set optim.master=bf16 --set optim.grad_dtype=bf16 --set pipeline.stages=1 --set devices.ids=[0]
         --set train.steps=${CURVE_STEPS:-300} --set train.eval_every=${CURVE_EVAL:-50} --set train.eval_batches=8
         --set train.warmup_steps=20 --set data.path="$corpus" --set checkpoint.every=0)
  runs=(bf16=$OUT/curve-bf16 fp8=$OUT/curve-fp8)
  timeout ${CURVE_TIMEOUT:-280} $BIN train configs/gpt-1b-2gpu.yaml "${curve[@]}" --out "$OUT/curve-bf16" > /dev/null 2> "$OUT/curve-bf16.log"
  timeout ${CURVE_TIMEOUT:-280} $BIN train configs/gpt-1b-2gpu.yaml "${curve[@]}" --set precision.matmul=fp8 --out "$OUT/curve-fp8" > /dev/null 2> "$OUT/curve-fp8.log"
  if [ "${FP8_DELAYED:-0}" = 1 ]; then
    timeout ${CURVE_TIMEOUT:-280} $BIN train configs/gpt-1b-2gpu.yaml "${curve[@]}" --set precision.matmul=fp8 \
      --set precision.fp8_scaling=delayed --out "$OUT/curve-fp8-delayed" > /dev/null 2> "$OUT/curve-fp8-delayed.log"
    runs+=(fp8-delayed=$OUT/curve-fp8-delayed)
  fi
  python3 scripts/loss_curves.py --out "$OUT/fp8-curve.svg" "${runs[@]}" > "$OUT/fp8-curve.json" 2>&1
  row "fp8 curve: max smoothed gap, eval gap" "$(python3 -c "import json; d=json.load(open('$OUT/fp8-curve.json')); print([(r['name'], round(r['max_smoothed_gap'] or 0, 4), round(r['final_eval_gap'] or 0, 4), round(r['final_eval_loss'] or 0, 4)) for r in d['runs']])" 2>&1)"
fi

# 14. A/B against an earlier build (BEFORE=path to its conveyor, packed beside .gpu/): the
#     kernel sums per step and one GPU end to end (all-bf16, 1F1B), alternated AB_ROUNDS
#     times (default 2) so drift between runs falls on both
if want ab; then
  [ -x "${BEFORE:-}" ] || { echo "gpu_check: section ab needs BEFORE=<conveyor of the earlier build>" >&2; exit 2; }
  for who in before after; do
    [ "${AB_KERNELS:-1}" = 0 ] && break
    bin=$BIN; [ $who = before ] && bin=$BEFORE
    timeout 240 $bin bench kernels configs/gpt-1b-2gpu.yaml --format json > "$OUT/kernels-$who.json" 2> "$OUT/kernels-$who.log"
    row "kernel ms per step, $who" "$(python3 -c "import json; print(round(json.load(open('$OUT/kernels-$who.json'))['kernel_ms_per_step_one_gpu'], 1))" 2>/dev/null || echo failed)"
  done
  python3 - "$OUT/kernels-before.json" "$OUT/kernels-after.json" > "$OUT/kernels-ab.txt" 2>&1 <<'PY'
import json, sys
before, after = ({r["kernel"]: r for r in json.load(open(p))["kernels"]} for p in sys.argv[1:3])
print(f"{'kernel':<50} {'before ms':>10} {'after ms':>10} {'after/before':>12}")
for name, a in after.items():
    b = before.get(name)
    print(f"{name:<50} {b['ms'] if b else float('nan'):10.4f} {a['ms']:10.4f} {a['ms'] / b['ms'] if b else float('nan'):12.3f}")
PY
  cat "$OUT/kernels-ab.txt" >&2
  for round in $(seq ${AB_ROUNDS:-2}); do
    for sched in ${AB_SCHEDULES:-1f1b}; do
      for who in before after; do
        bin=$BIN; [ $who = before ] && bin=$BEFORE
        BIN=$bin big onegpu-$sched-$who-$round --set pipeline.stages=1 --set devices.ids=[0] \
          --set pipeline.schedule=$sched --set optim.master=bf16 --set optim.grad_dtype=bf16
      done
    done
  done
fi

if want multiproc; then
  MP_BIN=${MP_BIN:-$BIN}
  mp=(--set devices.kind=cuda --set model.d_model=128 --set model.heads=2 --set model.vocab=512
      --set model.layers=4 --set train.steps=20 --set train.eval_every=10 --set pipeline.micro_batches=4
      --set pipeline.stages=2 --set devices.ids=[0,1] --set runtime.deterministic=true)
  timeout 120 $MP_BIN train "${mp[@]}" --out "$OUT/mp-one" > /dev/null 2> "$OUT/mp-one.log"
  port=$((29500 + RANDOM % 2000))
  for n in 0 1; do
    timeout 150 $MP_BIN train "${mp[@]}" --nnodes 2 --node-rank $n --rdzv 127.0.0.1:$port \
      --token gpu-check-multiproc --out "$OUT/mp-two" > "$OUT/mp-two-$n.out" 2> "$OUT/mp-two-$n.log" &
  done
  wait
  row "2 processes x 1 GPU (nccl) vs 1 x 2 GPUs" "$(cmp -s "$OUT/mp-one/weights.safetensors" "$OUT/mp-two/weights.safetensors" && echo identical || echo DIFFERENT)"
  row "2 processes: final val_loss" "$(tail -1 "$OUT/mp-two/metrics.jsonl" 2>/dev/null | json_field final_val_loss)"
  grep -h -iE 'nccl|error|failed' "$OUT"/mp-two-*.log | head -5 >&2
fi

# 16. One GPU only (when that is all that is lent): the one-GPU figure that issue 8's
#     efficiency divides by, and ZBV's two model stages on that GPU cut on whole blocks and
#     between a block's halves ([12.5, 11.5]) end to end; a small deterministic run whose
#     weights must not depend on that cut; PyTorch's one-GPU figure comes from section torch
if want onegpu; then
  e2e=(--set optim.master=bf16 --set optim.grad_dtype=bf16 --set pipeline.stages=1 --set devices.ids=[0])
  big onegpu-1f1b-a "${e2e[@]}" --set pipeline.schedule=1f1b
  big onegpu-zbv-whole "${e2e[@]}" --set pipeline.schedule=zbv
  big onegpu-zbv-half "${e2e[@]}" --set pipeline.schedule=zbv --set "pipeline.partition=[12.5,11.5]"
  big onegpu-zbh1 "${e2e[@]}" --set pipeline.schedule=zb-h1
  big onegpu-1f1b-b "${e2e[@]}" --set pipeline.schedule=1f1b
  # Where one GPU's step goes, per schedule: device time of each action kind per step (F,
  # B fused, I input and W weight gradients) and the GPU's idle share, from a traced run
  for sched in 1f1b zbv; do
    timeout 200 $BIN train configs/gpt-1b-2gpu.yaml "${e2e[@]}" --set train.steps=4 --set train.eval_every=0 \
      --set pipeline.schedule=$sched --set trace.enabled=true --out "$OUT/onegpu-traced-$sched" > /dev/null 2> "$OUT/onegpu-traced-$sched.log"
    timeout 60 $BIN trace export "$OUT/onegpu-traced-$sched" --chrome "$OUT/onegpu-traced-$sched.json" 2>> "$OUT/onegpu-traced-$sched.log"
    row "one GPU $sched traced: ms per step by kind" "$(python3 - "$OUT/onegpu-traced-$sched.json" <<'PY' 2>&1
import json, sys, collections
d = json.load(open(sys.argv[1]))
ev = [e for e in (d["traceEvents"] if isinstance(d, dict) else d) if e.get("cat") == "action"]
steps = sorted({e["args"]["step"] for e in ev})[1:]  # the first step warms up
by = collections.defaultdict(float)
span = {}
for e in ev:
    s = e["args"]["step"]
    if s not in steps: continue
    by[e["name"][0]] += e["dur"] / 1e3 / len(steps)
    lo, hi = span.get(s, (e["ts"], e["ts"] + e["dur"]))
    span[s] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
wall = sum(h - l for l, h in span.values()) / 1e3 / len(steps)
print({k: round(v, 1) for k, v in sorted(by.items())}, "actions", round(sum(by.values()), 1), "of", round(wall, 1), "ms per step (first to last action)")
PY
)"
    rm -rf "$OUT/onegpu-traced-$sched/trace" "$OUT/onegpu-traced-$sched/weights.safetensors" "$OUT/onegpu-traced-$sched.json"
  done
  row "one GPU 1f1b MFU (of 790 TFLOP/s), a and b" "$(python3 -c "import json; print(*[round(json.load(open('$OUT/onegpu-1f1b-' + r + '.json'))['tflops_per_gpu'] / 790, 3) for r in 'ab'])" 2>/dev/null || echo failed)"
  cut=(--set devices.kind=cuda --set model.d_model=128 --set model.heads=2 --set model.vocab=512
       --set model.layers=4 --set train.steps=12 --set train.eval_every=0 --set pipeline.micro_batches=4
       --set pipeline.stages=1 --set devices.ids=[0] --set pipeline.schedule=zbv --set runtime.deterministic=true)
  timeout 120 $BIN train "${cut[@]}" --set "pipeline.partition=[2,2]" --out "$OUT/cut-whole" > /dev/null 2> "$OUT/cut-whole.log"
  timeout 120 $BIN train "${cut[@]}" --set "pipeline.partition=[2.5,1.5]" --out "$OUT/cut-half" > /dev/null 2> "$OUT/cut-half.log"
  row "small GPU ZBV [2,2] vs [2.5,1.5] weights" "$(cmp -s "$OUT/cut-whole/weights.safetensors" "$OUT/cut-half/weights.safetensors" && echo identical || echo DIFFERENT)"
fi

# 15. Issue 8's targets in one call (2 GPUs): conveyor ZBV twice around its one-GPU runs, each
#     time on whole blocks and on HALF_PARTITION (the head's model stage gives half a block
#     to its neighbour: kernels/model/stage_slice.hpp), and PyTorch's ZBV and 1F1B, all-bf16
#     (the reference's recipe; conveyor with bf16
#     gradients too), then the ratio table: against PyTorch's best schedule of the same
#     call, pipeline efficiency, MFU against the 790 TFLOP/s ceiling, first-stage memory
if want targets; then
  e2e=(--set optim.master=bf16 --set optim.grad_dtype=bf16)
  half=(--set pipeline.schedule=zbv --set "pipeline.partition=${HALF_PARTITION:-[6,6,6.5,5.5]}")
  big targets-zbv-a "${e2e[@]}" --set pipeline.schedule=zbv
  big targets-zbvhalf-a "${e2e[@]}" "${half[@]}"
  big targets-one "${e2e[@]}" --set pipeline.stages=1 --set devices.ids=[0] --set pipeline.schedule=1f1b
  # conveyor's other one-GPU figure: ZBV's two chunks on one GPU (two streams), faster than
  # 1F1B's gradient accumulation in session 12; efficiency is shown against both
  big targets-one-zbv "${e2e[@]}" --set pipeline.stages=1 --set devices.ids=[0] --set pipeline.schedule=zbv
  big targets-zbv-b "${e2e[@]}" --set pipeline.schedule=zbv
  big targets-zbvhalf-b "${e2e[@]}" "${half[@]}"
  for run in zbv:ScheduleZBVZeroBubble:2 1f1b:Schedule1F1B:1; do
    [ "${TARGETS_TORCH:-1}" = 0 ] && break  # PyTorch's pipeline needs two GPUs
    IFS=: read -r name schedule chunks <<< "$run"
    STEPS=6 WARM=3 MASTER=bf16 timeout 150 python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
      .gpu/torch_pp_bench.py "$schedule:$chunks" > "$OUT/targets-torch-$name.json" 2> "$OUT/targets-torch-$name.log"
  done
  # Where the two-GPU step goes: a traced ZBV run on the half-block cut, each GPU's busy
  # share (device time its actions cover), the overlap of its two chunks' streams, the
  # bubble beside the simulator's (TARGETS_TRACE=0 skips it)
  if [ "${TARGETS_TRACE:-1}" != 0 ]; then
    timeout 200 $BIN train configs/gpt-1b-2gpu.yaml "${e2e[@]}" "${half[@]}" --set train.steps=4 \
      --set train.eval_every=0 --set trace.enabled=true --out "$OUT/targets-traced" > /dev/null 2> "$OUT/targets-traced.log"
    timeout 60 $BIN trace summary "$OUT/targets-traced" --format json > "$OUT/targets-trace.json" 2>> "$OUT/targets-traced.log"
    row "traced ZBV half: busy, overlap ms per GPU, bubble" "$(python3 -c "import json; d=json.load(open('$OUT/targets-trace.json')); print([round(s['busy_fraction'], 3) for s in d['per_stage']], [round(s['overlap_ms'] / d['steps'], 1) for s in d['per_stage']], round(d['bubble'], 3))" 2>/dev/null || echo failed)"
    rm -rf "$OUT/targets-traced/trace" "$OUT/targets-traced/weights.safetensors"
  fi
  python3 - "$OUT" > "$OUT/targets.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
def ours(name):
    try: return json.load(open(f"{out}/targets-{name}.json"))
    except Exception: return None
def torch(name):
    d = {}
    try:
        for line in open(f"{out}/targets-torch-{name}.json"):
            if line.startswith("{"): d.update(json.loads(line))
    except Exception: pass
    return d
zbv = [(n, d) for n, d in (("whole blocks", ours("zbv-a")), ("half blocks", ours("zbvhalf-a")),
                           ("whole blocks", ours("zbv-b")), ("half blocks", ours("zbvhalf-b"))) if d]
one, one_zbv = ours("one"), ours("one-zbv")
tz, t1 = torch("zbv"), torch("1f1b")
best = max([t.get("tokens_per_s", 0) for t in (tz, t1)] or [0])
def line(label, value, target=""):
    print(f"{label:<48} {value:>10} {target:>8}")
line("measure", "value", "target")
for i, (cut, d) in enumerate(zbv):
    tps = d["tokens_per_s"]
    line(f"conveyor ZBV run {i + 1} ({cut}), tokens/s", f"{tps:.0f}")
    if best: line(f"  / PyTorch's best of this call ({best:.0f})", f"{tps / best:.3f}", ">= 1.20")
    for label, o in (("1F1B", one), ("ZBV", one_zbv)):
        if o: line(f"  efficiency vs 2 x one GPU {label} ({o['tokens_per_s']:.0f})", f"{tps / (2 * o['tokens_per_s']):.3f}", ">= 0.95")
    line("  MFU per GPU (of 790 TFLOP/s)", f"{d['tflops_per_gpu'] / 790:.3f}", ">= 0.70")
    if tz.get("rank0_peak_GiB"): line(f"  first GPU GiB allocated (PyTorch ZBV {tz['rank0_peak_GiB']:.2f})", f"{d['peak_allocated_gib'][0]:.2f}", "<= it")
for name, t in (("ZBV", tz), ("1F1B", t1)):
    line(f"PyTorch {name}, tokens/s", f"{t.get('tokens_per_s', float('nan')):.0f}")
PY
  cat "$OUT/targets.txt" >&2
fi

# 4. PyTorch's pipelining on the same model in the same call
want torch || { echo; printf '%s\n' "${rows[@]}"; exit 0; }
torch_pp() { # name, MASTER, mode
  STEPS=6 WARM=3 MASTER=$2 timeout 150 python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
    .gpu/torch_pp_bench.py "$3" > "$OUT/torch-$1.json" 2> "$OUT/torch-$1.log"
  row "torch $1 tokens/s" "$(grep tokens_per_s "$OUT/torch-$1.json" | json_field tokens_per_s) $(grep peak "$OUT/torch-$1.json" | json_field rank0_peak_GiB) GiB"
}
if want torchpp; then
  for run in ${TORCH_RUNS:-1f1b-fp32:fp32:Schedule1F1B:1 zbv-bf16:bf16:ScheduleZBVZeroBubble:2 1f1b-bf16:bf16:Schedule1F1B:1}; do
    IFS=: read -r name master schedule chunks <<< "$run"
    torch_pp "$name" "$master" "$schedule:$chunks"
  done
fi
for m in ${MASTERS:-fp32 bf16}; do
  STEPS=6 WARM=3 MASTER=$m timeout 120 python3 .gpu/torch_pp_bench.py single > "$OUT/torch-single-$m.json" 2> "$OUT/torch-single-$m.log"
  row "torch one GPU $m tokens/s" "$(grep tokens_per_s "$OUT/torch-single-$m.json" | json_field tokens_per_s)"
done

echo; printf '%s\n' "${rows[@]}"
