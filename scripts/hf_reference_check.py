#!/usr/bin/env python3
"""conveyor against transformers, the reference nobody here wrote (issue 42, item 6).

Runs where PyTorch, transformers, safetensors are installed (the GPU machine; CPU only, no
network). For each small model below, built from a config with random weights from a fixed
seed and saved with save_pretrained (safetensors):

  1. `conveyor hf import HF --out CKPT`, then `conveyor hf logits CKPT --tokens ...` on
     random token rows; transformers' LlamaForCausalLM / GPT2LMHeadModel (CPU, fp32,
     eager attention) on the same rows. Checked:
       logits  max|conveyor - transformers| / max|transformers|   <= 1e-4
       loss    |conveyor - transformers| / |transformers|         <= 1e-5
     (relative to the logits' largest magnitude, so logits near zero count by their
     absolute error; the loss is the mean over B*T positions of the next-token
     cross-entropy, transformers' computed in float64 from its fp32 logits).
  2. Only when `conveyor hf export` exists (else one row "skipped: conveyor hf export
     missing"): `conveyor train` a few steps from CKPT (`--init-from CKPT` when train has
     it, else `--resume CKPT --force`) on a random token corpus, checkpointing the last
     step; `conveyor hf export RUN --out EXPORT --dtype fp32`; `from_pretrained(EXPORT,
     output_loading_info=True)` must report no missing, unexpected or mismatched key; on
     held-out rows transformers' loss and logits must match `conveyor hf logits RUN`'s
     within 1e-4 relative, conveyor must read the export back to the run's very logits,
     and the loss must have moved from the imported model's (else the export could be
     the import's weights).

  3. Where a GPU is present and `conveyor hf logits` takes --device (else one row
     "skipped"): GPU_MODELS (head size 64, widths multiples of 8, as the CUDA kernels
     need) imported and scored by `conveyor hf logits --device cuda` (bf16 compute, fp32
     master weights) against transformers in fp32 on the CPU:
       logits  max|conveyor - transformers| / max|transformers|   <= 3e-2
       loss    |conveyor - transformers| / |transformers|         <= 1e-2
     "within bf16 rounding": bf16 keeps 8 significant bits (a relative step of 2^-8 =
     3.9e-3 per rounding) and the activations are rounded after every kernel of two
     blocks; a wrong rotation, grouping or index gives errors of order 1.

Ends with a table (model, check, value, limit, result) and exits 1 on any FAIL.

--write-fixture DIR writes the fixture tests/apps/hf/hf_reference_test.cpp checks in CI
without transformers: per case DIR/<case>/hf/{config.json, model.safetensors} as saved,
reference.safetensors ("tokens" i32 (B, T + 1), "logits" f32 (B, T, V)),
reference.json ({"loss": ...}), and DIR/README.md naming the command and the versions.
With --conveyor as well, the fixture's cases are also checked through conveyor.

Usage, from the repository root after the build:
  python3 scripts/hf_reference_check.py --conveyor build/conveyor --out /tmp/hf-ref
  python3 scripts/hf_reference_check.py --write-fixture tests/data/hf_reference/ \\
      [--conveyor build/conveyor --out /tmp/hf-ref]
"""
import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

LOGITS_LIMIT = 1e-4
LOSS_LIMIT = 1e-5
EXPORT_LIMIT = 1e-4
GPU_LOGITS_LIMIT = 3e-2
GPU_LOSS_LIMIT = 1e-2
REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------- the models
# Each: a name, an architecture, the config's keys, the weights' seed. Vocabularies stay
# below 65536 (a 2-byte token corpus trains them) and max positions small (training keeps
# model.seq_len, the import's max positions).

LLAMA3_SCALING = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 16}

CHECK_MODELS = [
    # Grouped-query (2 kv heads for 4), Llama 3.1's rope scaling over 16 original positions
    # (head size 16, theta 5e5: the first frequency blended, the slower ones divided, the
    # fastest kept), an untied head.
    {"name": "llama-gqa-llama3-untied", "arch": "llama", "seed": 1,
     "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 160, "vocab": 320, "positions": 64,
     "rope_theta": 500000.0, "rope_scaling": LLAMA3_SCALING, "tied": False},
    # Tied head, 8 heads on 2 kv heads, no scaling, transformers' default theta.
    {"name": "llama-gqa-tied", "arch": "llama", "seed": 2,
     "hidden": 64, "layers": 3, "heads": 8, "kv_heads": 2, "ffn": 96, "vocab": 300, "positions": 64,
     "rope_theta": 10000.0, "rope_scaling": None, "tied": True},
    {"name": "gpt2", "arch": "gpt2", "seed": 3,
     "hidden": 64, "layers": 2, "heads": 4, "vocab": 320, "positions": 64},
]

# Shapes the CUDA stage model takes: head size 64, d_model, ffn and vocab multiples of 8.
GPU_MODELS = [
    {"name": "gpu-llama-gqa-llama3", "arch": "llama", "seed": 21,
     "hidden": 256, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 320, "positions": 64,
     "rope_theta": 500000.0, "rope_scaling": LLAMA3_SCALING, "tied": True},
    {"name": "gpu-gpt2", "arch": "gpt2", "seed": 22,
     "hidden": 128, "layers": 2, "heads": 2, "vocab": 320, "positions": 64},
]

FIXTURE_MODELS = [
    {"name": "tiny-llama-gqa-llama3", "arch": "llama", "seed": 11,
     "hidden": 32, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 48, "vocab": 128, "positions": 32,
     "rope_theta": 500000.0, "rope_scaling": LLAMA3_SCALING, "tied": False},
    {"name": "tiny-gpt2", "arch": "gpt2", "seed": 12,
     "hidden": 32, "layers": 2, "heads": 4, "vocab": 128, "positions": 32},
]

ROWS, POSITIONS = 3, 32            # the compared token rows: (ROWS, POSITIONS + 1) ids
FIXTURE_ROWS, FIXTURE_POSITIONS = 2, 16
TRAIN_STEPS = 3


def need_torch():
    global torch, F, transformers, safetensors_torch
    import torch  # noqa: F401
    import torch.nn.functional as F  # noqa: F401
    import transformers  # noqa: F401
    import safetensors.torch as safetensors_torch  # noqa: F401


def llama_rope_kwargs(LlamaConfig, theta, scaling):
    """transformers 5 takes rope_parameters; 4 took rope_theta and rope_scaling."""
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        params = {"rope_type": "default", "rope_theta": theta}
        if scaling:
            params = {"rope_type": "llama3", "rope_theta": theta, **scaling}
        return {"rope_parameters": params}
    return {"rope_theta": theta, "rope_scaling": {"rope_type": "llama3", **scaling} if scaling else None}


def build_model(spec):
    """The model of `spec` with random weights drawn from its seed, eval mode, fp32."""
    if spec["arch"] == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(
            vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
            num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
            num_key_value_heads=spec["kv_heads"], max_position_embeddings=spec["positions"],
            rms_norm_eps=1e-5, hidden_act="silu", attention_bias=False, mlp_bias=False,
            tie_word_embeddings=spec["tied"],
            **llama_rope_kwargs(LlamaConfig, spec["rope_theta"], spec["rope_scaling"]))
        cls = LlamaForCausalLM
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(
            vocab_size=spec["vocab"], n_embd=spec["hidden"], n_layer=spec["layers"], n_head=spec["heads"],
            n_positions=spec["positions"], activation_function="gelu_new", layer_norm_epsilon=1e-5,
            tie_word_embeddings=True)
        cls = GPT2LMHeadModel
    config._attn_implementation = "eager"
    torch.manual_seed(spec["seed"])
    model = cls(config)
    if hasattr(model, "set_attn_implementation"):  # newer transformers; the table checks the outcome
        model.set_attn_implementation("eager")
    # transformers' init (std 0.02) makes nearly uniform logits: scale the weights up so
    # that attention, norms and the head all shape the output. Tied weights are one
    # parameter, drawn once.
    generator = torch.Generator().manual_seed(spec["seed"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if name.endswith("bias"):
                p.copy_(0.1 * noise)
            elif p.dim() == 1:  # a norm's gain
                p.copy_(1.0 + 0.2 * noise)
            elif "embed" in name or "wte" in name or "wpe" in name:
                p.copy_(noise)
            else:  # a projection (Linear (out, in) or GPT-2's Conv1D (in, out))
                p.copy_(noise / spec["hidden"] ** 0.5)
    return model.float().eval()


def random_rows(vocab, rows, positions, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (rows, positions + 1), generator=g, dtype=torch.int64)


def hf_logits_and_loss(model, tokens):
    """transformers' logits of tokens[:, :T] and mean cross-entropy against tokens[:, 1:]."""
    with torch.no_grad():
        logits = model(input_ids=tokens[:, :-1]).logits.float()
    loss = F.cross_entropy(logits.double().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    return logits, float(loss)


def relative_error(a, b):
    """max|a - b| / max|b|."""
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def save_folder(model, folder):
    """save_pretrained as safetensors, keeping config.json and model.safetensors alone."""
    tmp = Path(str(folder) + ".saving")
    shutil.rmtree(tmp, ignore_errors=True)
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:  # transformers 4
        model.save_pretrained(tmp, safe_serialization=True)
    else:  # transformers 5 writes safetensors alone
        model.save_pretrained(tmp)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tmp / name, folder / name)
    shutil.rmtree(tmp)


# ---------------------------------------------------------------------------- conveyor

class Conveyor:
    def __init__(self, binary):
        self.binary = str(Path(binary).resolve())

    def run(self, *args, timeout=600):
        """(exit code, stdout, stderr), run from the repository root."""
        p = subprocess.run([self.binary, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def has(self, *subcommand, option=None):
        code, out, _ = self.run(*subcommand, "--help", timeout=60)
        return code == 0 and (option is None or option in out)

    def logits(self, checkpoint, tokens, work, device="cpu"):
        """conveyor's (logits, loss, step of the checkpoint read) of `tokens` from `checkpoint`."""
        tokens_file, logits_file = work / "tokens.safetensors", work / "logits.safetensors"
        safetensors_torch.save_file({"tokens": tokens.to(torch.int32).contiguous()}, str(tokens_file))
        device_args = [] if device == "cpu" else ["--device", device]
        code, out, err = self.run("hf", "logits", checkpoint, "--tokens", tokens_file, "--out", logits_file,
                                  "--format", "json", *device_args)
        if code != 0:
            raise RuntimeError(f"conveyor hf logits {checkpoint}: exit {code}: {err.strip()[-2000:]}")
        summary = json.loads(out)
        return safetensors_torch.load_file(str(logits_file))["logits"], summary["loss"], summary["step"]


class Table:
    def __init__(self):
        self.rows = []

    def add(self, model, check, value, limit, ok):
        result = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
        self.rows.append((model, check, value, limit, result))
        return ok

    def within(self, model, check, value, limit):
        return self.add(model, check, f"{value:.3e}", f"<= {limit:.0e}", value <= limit)

    def failed(self):
        return any(r[4] == "FAIL" for r in self.rows)

    def print(self):
        header = ("model", "check", "value", "limit", "result")
        widths = [max(len(str(r[i])) for r in [header, *self.rows]) for i in range(5)]
        for r in [header, tuple("-" * w for w in widths), *self.rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def import_folder(conveyor, name, hf_dir, work, table):
    """`conveyor hf import hf_dir` into work/ckpt (a table row); the checkpoint, or None."""
    ckpt = work / "ckpt"
    shutil.rmtree(ckpt, ignore_errors=True)
    code, _, err = conveyor.run("hf", "import", hf_dir, "--out", ckpt)
    if not table.add(name, "hf import", f"exit {code}", "exit 0", code == 0):
        print(err, file=sys.stderr)
        return None
    return ckpt


def compare_with_conveyor(conveyor, spec, model, hf_dir, work, tokens, table):
    """Import hf_dir and check conveyor's logits and loss of `tokens` against the model's."""
    name = spec["name"]
    ckpt = import_folder(conveyor, name, hf_dir, work, table)
    if ckpt is None:
        return None
    attention = model.config._attn_implementation
    table.add(name, "transformers attention", attention, "eager", attention == "eager")
    want_logits, want_loss = hf_logits_and_loss(model, tokens)
    got_logits, got_loss, _ = conveyor.logits(ckpt, tokens, work)
    table.within(name, "logits max|a-b|/max|b|", relative_error(got_logits, want_logits), LOGITS_LIMIT)
    table.within(name, "loss |a-b|/|b|", abs(got_loss - want_loss) / abs(want_loss), LOSS_LIMIT)
    return ckpt


def gpu_compare(conveyor, spec, work, table):
    """Import GPU_MODELS' `spec` and check `hf logits --device cuda` against transformers (fp32)."""
    name = spec["name"]
    model = build_model(spec)
    save_folder(model, work / "hf")
    ckpt = import_folder(conveyor, name, work / "hf", work, table)
    if ckpt is None:
        return
    tokens = random_rows(spec["vocab"], ROWS, POSITIONS, spec["seed"] + 1)
    want_logits, want_loss = hf_logits_and_loss(model, tokens)
    got_logits, got_loss, _ = conveyor.logits(ckpt, tokens, work, device="cuda")
    table.within(name, "GPU bf16 logits max|a-b|/max|b|", relative_error(got_logits, want_logits),
                 GPU_LOGITS_LIMIT)
    table.within(name, "GPU bf16 loss |a-b|/|b|", abs(got_loss - want_loss) / abs(want_loss), GPU_LOSS_LIMIT)


def write_token_corpus(path, vocab, tokens, seed):
    """A raw little-endian uint16 token file (data.format tokens, data.token_bytes 2)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (tokens,), generator=g, dtype=torch.int32)
    path.write_bytes(ids.numpy().astype("<u2").tobytes())


def train_export_check(conveyor, spec, ckpt, work, table, imported_loss_of):
    """Train from the import, export, reload with transformers, compare on held-out rows."""
    name = spec["name"]
    corpus = work / "corpus.u16"
    write_token_corpus(corpus, spec["vocab"], 200_000, spec["seed"] + 100)
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    start = ["--init-from", ckpt] if conveyor.has("train", option="--init-from") else ["--resume", ckpt, "--force"]
    sets = [f"train.steps={TRAIN_STEPS}", "train.eval_every=0", f"checkpoint.every={TRAIN_STEPS}",
            "train.lr=0.003", "train.warmup_steps=0", "pipeline.stages=2", "pipeline.micro_batches=2",
            f"data.path={corpus}", "data.format=tokens", "data.token_bytes=2"]
    args = ["train", ckpt / "config.yaml", "--out", run, *start]
    for s in sets:
        args += ["--set", s]
    code, _, err = conveyor.run(*args)
    if not table.add(name, f"train {TRAIN_STEPS} steps ({start[0]})", f"exit {code}", "exit 0", code == 0):
        print(err, file=sys.stderr)
        return
    export = work / "export"
    shutil.rmtree(export, ignore_errors=True)
    code, _, err = conveyor.run("hf", "export", run, "--out", export, "--dtype", "fp32")
    if not table.add(name, "hf export --dtype fp32", f"exit {code}", "exit 0", code == 0):
        print(err, file=sys.stderr)
        return
    cls = model_class(spec)
    reloaded, info = cls.from_pretrained(export, output_loading_info=True, dtype=torch.float32,
                                         attn_implementation="eager")
    reloaded.eval()
    problems = {k: v for k, v in info.items() if v}
    table.add(name, "from_pretrained missing/unexpected/mismatched keys",
              "none" if not problems else json.dumps({k: list(map(str, v)) for k, v in problems.items()})[:200],
              "none", not problems)
    held_out = random_rows(spec["vocab"], ROWS, POSITIONS, spec["seed"] + 200)
    want_logits, want_loss = hf_logits_and_loss(reloaded, held_out)
    got_logits, got_loss, step = conveyor.logits(run, held_out, work)
    table.add(name, "hf logits RUN reads the last step", f"step {step}", f"step {TRAIN_STEPS}", step == TRAIN_STEPS)
    table.within(name, "exported: held-out loss |a-b|/|b|", abs(got_loss - want_loss) / abs(want_loss), EXPORT_LIMIT)
    table.within(name, "exported: held-out logits max|a-b|/max|b|", relative_error(got_logits, want_logits),
                 EXPORT_LIMIT)
    reread_logits, reread_loss, _ = conveyor.logits(export, held_out, work)
    same = reread_loss == got_loss and torch.equal(reread_logits, got_logits)
    table.add(name, "hf logits EXPORT == hf logits RUN (bitwise)", "equal" if same else f"{reread_loss!r}", "equal", same)
    before = imported_loss_of(held_out)
    moved = abs(got_loss - before) / abs(before)
    table.add(name, "training moved the held-out loss", f"{moved:.3e}", "> 1e-6", moved > 1e-6)


def model_class(spec):
    from transformers import GPT2LMHeadModel, LlamaForCausalLM
    return LlamaForCausalLM if spec["arch"] == "llama" else GPT2LMHeadModel


def write_fixture(dir_, conveyor, out, table):
    dir_ = Path(dir_)
    dir_.mkdir(parents=True, exist_ok=True)
    for spec in FIXTURE_MODELS:
        case = dir_ / spec["name"]
        shutil.rmtree(case, ignore_errors=True)
        model = build_model(spec)
        save_folder(model, case / "hf")
        tokens = random_rows(spec["vocab"], FIXTURE_ROWS, FIXTURE_POSITIONS, spec["seed"] + 1)
        logits, loss = hf_logits_and_loss(model, tokens)
        safetensors_torch.save_file({"tokens": tokens.to(torch.int32).contiguous(), "logits": logits.contiguous()},
                                    str(case / "reference.safetensors"))
        (case / "reference.json").write_text(json.dumps(
            {"loss": loss, "rows": FIXTURE_ROWS, "positions": FIXTURE_POSITIONS,
             "loss_is": "mean over rows*positions of cross_entropy(logits[:, t], tokens[:, t + 1]), float64 "
                        "from transformers' fp32 logits"}, indent=2) + "\n")
        if conveyor:
            work = out / "fixture" / spec["name"]
            work.mkdir(parents=True, exist_ok=True)
            compare_with_conveyor(conveyor, {**spec, "name": "fixture " + spec["name"]}, model, case / "hf", work,
                                  tokens, table)
    size = sum(f.stat().st_size for f in dir_.rglob("*") if f.is_file())
    (dir_ / "README.md").write_text(f"""# Reference numbers from transformers

Small Hugging Face models with random weights, and transformers' own logits and loss on
random token rows, for tests/apps/hf/hf_reference_test.cpp, which checks conveyor against
them in CI without transformers (logits max|a-b|/max|b| <= {LOGITS_LIMIT:.0e}, loss relative
<= {LOSS_LIMIT:.0e}).

Each case folder: `hf/` (config.json and model.safetensors as save_pretrained wrote them),
`reference.safetensors` ("tokens" i32 (B, T + 1); "logits" f32 (B, T, V) of tokens[:, :T],
CPU, fp32, eager attention) and `reference.json` (the mean cross-entropy of those logits
against tokens[:, 1:], in float64).

Cases: {", ".join(s["name"] for s in FIXTURE_MODELS)} (the specs are FIXTURE_MODELS in the script).

Made from the repository root with:

    python3 {" ".join(sys.argv)}

with Python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__},
safetensors {__import__("safetensors").__version__}. Total {size / 1024:.0f} KB.
""")
    print(f"wrote {dir_} ({size / 1024:.0f} KB)", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conveyor", help="the conveyor binary (e.g. build/conveyor)")
    parser.add_argument("--out", help="a work folder for the models, checkpoints and runs (created)")
    parser.add_argument("--write-fixture", metavar="DIR",
                        help="write the CI fixture (e.g. tests/data/hf_reference/) first")
    parser.add_argument("--skip-train", action="store_true", help="leave out the train/export round trip")
    args = parser.parse_args()
    if not args.conveyor and not args.write_fixture:
        parser.error("give --conveyor and --out, or --write-fixture DIR (or both)")
    if args.conveyor and not args.out:
        parser.error("--conveyor needs --out")
    try:
        need_torch()
    except ImportError as e:
        print(f"hf_reference_check: needs torch, transformers and safetensors: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    conveyor = Conveyor(args.conveyor) if args.conveyor else None
    out = Path(args.out).resolve() if args.out else None
    table = Table()

    if args.write_fixture:
        write_fixture(args.write_fixture, conveyor, out, table)
    if conveyor:
        has_export = conveyor.has("hf", "export")
        for spec in CHECK_MODELS:
            work = out / spec["name"]
            work.mkdir(parents=True, exist_ok=True)
            try:
                model = build_model(spec)
                save_folder(model, work / "hf")
            except Exception as e:  # a transformers version this script does not know
                table.add(spec["name"], "build and save_pretrained", f"error: {e!r}"[:200], "", False)
                continue
            tokens = random_rows(spec["vocab"], ROWS, POSITIONS, spec["seed"] + 1)
            try:
                ckpt = compare_with_conveyor(conveyor, spec, model, work / "hf", work, tokens, table)
            except Exception as e:  # one model's failure must not hide the others' rows
                table.add(spec["name"], "logits and loss", f"error: {e}"[:200], "", False)
                continue
            if ckpt is None:
                continue
            if args.skip_train:
                table.add(spec["name"], "train/export round trip", "skipped: --skip-train", "", None)
            elif not has_export:
                table.add(spec["name"], "train/export round trip", "skipped: conveyor hf export missing", "", None)
            else:
                try:
                    train_export_check(conveyor, spec, ckpt, work, table,
                                       lambda rows, m=model: hf_logits_and_loss(m, rows)[1])
                except Exception as e:
                    table.add(spec["name"], "train/export round trip", f"error: {e}"[:200], "", False)
        if not torch.cuda.is_available():
            table.add("GPU models", "hf logits --device cuda", "skipped: no GPU", "", None)
        elif not conveyor.has("hf", "logits", option="--device"):
            table.add("GPU models", "hf logits --device cuda", "skipped: no --device", "", None)
        else:
            for spec in GPU_MODELS:
                work = out / spec["name"]
                work.mkdir(parents=True, exist_ok=True)
                try:
                    gpu_compare(conveyor, spec, work, table)
                except Exception as e:
                    table.add(spec["name"], "GPU logits and loss", f"error: {e}"[:200], "", False)
        (out / "summary.json").write_text(json.dumps(
            [dict(zip(("model", "check", "value", "limit", "result"), r)) for r in table.rows], indent=2) + "\n")
    table.print()
    return 1 if table.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
