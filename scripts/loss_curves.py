#!/usr/bin/env python3
"""Compares training runs' loss curves from their metrics.jsonl files, and draws them.

Usage: scripts/loss_curves.py --out PLOT.svg [--smooth 20] NAME=RUN_DIR [NAME=RUN_DIR ...]

The first run is the reference. Prints one JSON line on stdout: per run, its final
smoothed loss and final eval loss, and against the reference the largest relative gap of
the smoothed training loss (a moving mean over --smooth steps, from the first full window
on) and the relative gap of the final eval loss. Writes an SVG (no plotting library
needed) of every run's smoothed training loss, with eval losses as dots.
Exits 2 on a missing or malformed file, naming it.
"""
import argparse
import json
import sys

def fail(message):
    print(f"loss_curves: {message}", file=sys.stderr)
    sys.exit(2)


COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def read_run(path):
    losses, evals = {}, {}
    try:
        with open(f"{path}/metrics.jsonl") as f:
            for n, line in enumerate(f, 1):
                row = json.loads(line)
                if "event" not in row and "loss" in row:
                    losses[row["step"]] = row["loss"]
                elif row.get("event") == "eval":
                    evals[row["after_step"]] = row["val_loss"]
    except (OSError, ValueError, KeyError) as e:
        fail(f"{path}/metrics.jsonl: {e}")
    if not losses:
        fail(f"{path}/metrics.jsonl has no training steps")
    steps = sorted(losses)
    return steps, [losses[s] for s in steps], evals


def smooth(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def svg(runs, path, window):
    w, h, pad = 760, 420, 60
    all_steps = [s for r in runs for s in r["steps"]]
    all_y = [y for r in runs for y in r["smooth"]] + [y for r in runs for y in r["evals"].values()]
    x0, x1 = min(all_steps), max(all_steps)
    y0, y1 = min(all_y), max(all_y)
    sx = lambda s: pad + (s - x0) / max(x1 - x0, 1) * (w - 2 * pad)
    sy = lambda y: h - pad - (y - y0) / max(y1 - y0, 1e-9) * (h - 2 * pad)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">step</text>',
             f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">loss (mean of {window} steps; dots: eval)</text>']
    for i in range(5):
        y = y0 + (y1 - y0) * i / 4
        parts.append(f'<text x="{pad - 5}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3f}</text>')
        s = x0 + (x1 - x0) * i / 4
        parts.append(f'<text x="{sx(s):.1f}" y="{h - pad + 15}" text-anchor="middle">{s:.0f}</text>')
    for k, r in enumerate(runs):
        c = COLOURS[k % len(COLOURS)]
        pts = " ".join(f"{sx(s):.1f},{sy(y):.1f}" for s, y in zip(r["steps"], r["smooth"]))
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
        for s, y in r["evals"].items():
            parts.append(f'<circle cx="{sx(s):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>')
        parts.append(f'<text x="{w - pad - 150}" y="{pad + 15 * k}" fill="{c}">{r["name"]}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="SVG file to write")
    ap.add_argument("--smooth", type=int, default=20, help="steps in the moving mean (default 20)")
    ap.add_argument("runs", nargs="+", help="NAME=RUN_DIR; the first is the reference")
    a = ap.parse_args()
    if a.smooth < 1:
        fail("--smooth must be >= 1")
    runs = []
    for spec in a.runs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            fail(f"'{spec}' is not NAME=RUN_DIR")
        steps, losses, evals = read_run(path)
        runs.append({"name": name, "steps": steps, "smooth": smooth(losses, a.smooth), "evals": evals})
    ref = runs[0]
    report = {"smooth": a.smooth, "runs": []}
    for r in runs:
        common = [i for i, s in enumerate(r["steps"]) if s in set(ref["steps"]) and i >= a.smooth - 1]
        ref_at = {s: y for s, y in zip(ref["steps"], ref["smooth"])}
        gap = max((abs(r["smooth"][i] - ref_at[r["steps"][i]]) / ref_at[r["steps"][i]] for i in common), default=None)
        last_eval = r["evals"][max(r["evals"])] if r["evals"] else None
        ref_eval = ref["evals"][max(ref["evals"])] if ref["evals"] else None
        report["runs"].append({"name": r["name"], "steps": len(r["steps"]), "final_smoothed_loss": r["smooth"][-1],
                               "final_eval_loss": last_eval, "max_smoothed_gap": gap,
                               "final_eval_gap": abs(last_eval - ref_eval) / ref_eval if last_eval and ref_eval else None})
    svg(runs, a.out, a.smooth)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
