#!/usr/bin/env python3
"""PyTorch's kernels at the reference GPT's shapes, as `conveyor bench kernels` names them.

Runs on the GPU machine (PyTorch 2.11, eager, bf16 as ../shared/bench/torch_pp_bench.py
runs the model): one micro-batch of MB sequences of S tokens through one block's ops, the
head and loss, and fused AdamW over all parameters. Prints one JSON object:
{"kernels": [{"kernel": name, "ms": median ms}, ...]}. Names match conveyor's rows where
the two compute the same thing (PyTorch's op sequence may take several kernels).
Env: LAYERS DMODEL HEADS SEQ VOCAB MICRO (defaults: the reference GPT), REPEATS.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

L = int(os.environ.get("LAYERS", 24))
D = int(os.environ.get("DMODEL", 2048))
H = int(os.environ.get("HEADS", 16))
S = int(os.environ.get("SEQ", 1024))
V = int(os.environ.get("VOCAB", 32768))
MB = int(os.environ.get("MICRO", 4))
REPEATS = int(os.environ.get("REPEATS", 20))
dev = torch.device("cuda:0")
bf = torch.bfloat16


def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(REPEATS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def rnd(*shape, scale=1.0, dtype=bf):
    return (torch.randn(*shape, device=dev) * scale).to(dtype)


rows = []


def add(name, fn):
    rows.append({"kernel": name, "ms": median_ms(fn)})


N = MB * S
x, x2 = rnd(MB, S, D), rnd(MB, S, D)
ln = torch.nn.LayerNorm(D, device=dev, dtype=bf)
w_qkv, b_qkv = rnd(3 * D, D, scale=0.02), rnd(3 * D, scale=0.02)
w_fc1, b_fc1 = rnd(4 * D, D, scale=0.02), rnd(4 * D, scale=0.02)
w_fc2, b_fc2 = rnd(D, 4 * D, scale=0.02), rnd(D, scale=0.02)
w_proj, b_proj = rnd(D, D, scale=0.02), rnd(D, scale=0.02)
with torch.no_grad():
    add("residual + LayerNorm forward", lambda: ln(x + x2))
    add("gemm qkv forward (+bias)", lambda: F.linear(x, w_qkv, b_qkv))
    add("gemm proj forward (+bias)", lambda: F.linear(x, w_proj, b_proj))
    add("gemm fc1 forward (+bias +GELU)", lambda: F.gelu(F.linear(x, w_fc1, b_fc1), approximate="tanh"))
    h = rnd(MB, S, 4 * D)
    add("gemm fc2 forward (+bias)", lambda: F.linear(h, w_fc2, b_fc2))

qkv = rnd(MB, S, 3 * D)
q, k, v = qkv.view(MB, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
with torch.no_grad():
    add("attention forward (causal)", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
dout = torch.randn_like(out)
add("attention backward (causal)", lambda: torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True))
# The rows above use the backend PyTorch picks by default (cuDNN's on an H200 with 2.11);
# each backend on its own, for the record of what conveyor's kernels are measured against.
for label, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
    try:
        with sdpa_kernel(backend):
            with torch.no_grad():
                add(f"attention forward (causal, {label} backend)",
                    lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            o_b = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            add(f"attention backward (causal, {label} backend)",
                lambda: torch.autograd.grad(o_b, (qg, kg, vg), dout, retain_graph=True))
    except RuntimeError as e:  # a backend this build or GPU lacks
        print(f"attention {label} backend: {e}", file=sys.stderr)

# Linear backward (input and weight gradients) and LayerNorm backward through autograd.
def linear_bwd(inp_features, out_features):
    a = rnd(N, inp_features).requires_grad_()
    w = rnd(out_features, inp_features, scale=0.02).requires_grad_()
    b = rnd(out_features, scale=0.02).requires_grad_()
    y = F.linear(a, w, b)
    dy = torch.randn_like(y)
    return lambda: torch.autograd.grad(y, (a,), dy, retain_graph=True), \
        lambda: torch.autograd.grad(y, (w, b), dy, retain_graph=True)


for name, i, o in (("qkv", D, 3 * D), ("proj", D, D), ("fc1", D, 4 * D), ("fc2", 4 * D, D)):
    bi, bw = linear_bwd(i, o)
    add(f"gemm {name} backward input", bi)
    add(f"gemm {name} backward weight", bw)

xl = rnd(MB, S, D).requires_grad_()
lnw = torch.nn.LayerNorm(D, device=dev, dtype=bf)
yl = lnw(xl)
dyl = torch.randn_like(yl)
add("LayerNorm backward (input and weight)", lambda: torch.autograd.grad(yl, (xl, lnw.weight, lnw.bias), dyl, retain_graph=True))

w_head = rnd(V, D, scale=0.02)
targets = torch.randint(0, V, (MB, S), device=dev)
with torch.no_grad():
    add("gemm head forward", lambda: F.linear(x, w_head))
    logits = F.linear(x, w_head)
    add("cross-entropy forward", lambda: F.cross_entropy(logits.float().view(-1, V), targets.view(-1)))
lg = logits.detach().requires_grad_()
loss = F.cross_entropy(lg.float().view(-1, V), targets.view(-1))
add("cross-entropy backward", lambda: torch.autograd.grad(loss, (lg,), retain_graph=True))
emb = torch.nn.Embedding(V, D, device=dev, dtype=bf)
tok = torch.randint(0, V, (MB, S), device=dev)
with torch.no_grad():
    add("embedding forward", lambda: emb(tok))

P = L * (12 * D * D + 13 * D) + 2 * V * D + S * D + 2 * D
for master, dtype in (("AdamW all-bf16 (fused)", bf), ("AdamW fp32 master (fused)", torch.float32)):
    p = torch.nn.Parameter(rnd(P, scale=0.02, dtype=dtype))
    p.grad = rnd(P, scale=1e-3, dtype=dtype)
    opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
    add(master, opt.step)
    del p, opt
    torch.cuda.empty_cache()

print(json.dumps({"torch": torch.__version__, "micro_batch": MB, "kernels": rows}))
