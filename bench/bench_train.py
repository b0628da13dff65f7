#!/usr/bin/env python3
"""Side-by-side CPU training benchmark: tokenmill vs a plain PyTorch training loop, same
machine, same models, same batch, sequence length and thread count, in one run.

For each model (bench_cpu.py's GPT-2 124M and SmolLM2-135M shapes, random f32 weights saved
as a Hugging Face directory that both engines load) it runs
  tokenmill -t T bench -m DIR --phases train --train-batch B --prompt-tokens S --json
      --compare "python3 bench/torch_train_peer.py DIR --batch B --seq-len S --threads T"
--repeats times on a quiet machine and keeps each engine's best tokens/s. Both time the same
work per step (zero gradients, forward + backward over B x S tokens with a loss at every
position, one AdamW step; one untimed warm-up step, then 2 timed ones), so tokens/s and the
ratio compare like with like. MFU = tokens/s x the FLOPs per token tokenmill counts
(measure/flops.h: 3 x forward incl. the logits) / the f32 GEMM peak that tokenmill bench
measured in the same run; the peer's MFU uses the same two numbers.

Usage: python3 bench/bench_train.py [--threads 2] [--models gpt2,smollm2] [--batch 1]
                                    [--seq-len 512] [--repeats 3] [--tokenmill PATH]
                                    [--out bench/out/train.json]
Needs: pip install torch transformers safetensors
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cpu as common  # noqa: E402  (models, machine facts, quiet-machine waits)

PEER = Path(__file__).resolve().parent / "torch_train_peer.py"


def run_pair(binary: str, model_dir: Path, args) -> dict:
    peer = shlex.join([sys.executable, str(PEER), str(model_dir), "--batch", str(args.batch),
                       "--seq-len", str(args.seq_len), "--threads", str(args.threads)])
    cmd = [binary, "-t", str(args.threads), "bench", "-m", str(model_dir), "--phases", "train",
           "--train-batch", str(args.batch), "--prompt-tokens", str(args.seq_len), "--json",
           "--compare", peer]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"tokenmill bench exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    report = json.loads(proc.stdout)
    ours = next(p for p in report["phases"] if p["phase"] == "train")
    theirs = next(p for p in report["compare"]["phases"] if p["phase"] == "train")
    return {"tokenmill_tok_s": ours["tokens_per_s"], "torch_tok_s": theirs["tokens_per_s"],
            "flops_per_token": ours["flops_per_token"], "peak_flops": report["roofline"]["peak_flops"]}


def measure_model(binary: str, name: str, model_dir: Path, args) -> dict:
    runs = []
    for i in range(args.repeats):
        foreign = common.wait_for_quiet(args.wait_quiet, args.quiet_threshold)
        r = run_pair(binary, model_dir, args)
        r["background_cores"] = foreign
        common.log(f"{name} run {i + 1}: tokenmill {r['tokenmill_tok_s']:.1f} tok/s, PyTorch {r['torch_tok_s']:.1f} "
                   f"tok/s, peak {r['peak_flops'] / 1e9:.0f} GFLOP/s")
        runs.append(r)
    best_peak = max(r["peak_flops"] for r in runs)
    best = {"tokenmill_tok_s": max(r["tokenmill_tok_s"] for r in runs),
            "torch_tok_s": max(r["torch_tok_s"] for r in runs),
            "flops_per_token": runs[0]["flops_per_token"], "peak_flops": best_peak}
    best["tokenmill_mfu"] = best["tokenmill_tok_s"] * best["flops_per_token"] / best_peak
    best["torch_mfu"] = best["torch_tok_s"] * best["flops_per_token"] / best_peak
    return {"model": name, "label": common.MODEL_SPECS[name]["label"], "best": best, "runs": runs}


def render_markdown(report: dict) -> str:
    lines = [
        f"CPU training, {report['threads']} threads, batch {report['batch']} x {report['seq_len']} tokens, "
        f"{report['date']}, commit {report['commit']}",
        f"command: `{report['command']}`",
        "",
        "| model | tokenmill tok/s | MFU | PyTorch tok/s | MFU | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for e in report["results"]:
        b = e["best"]
        lines.append(f"| {e['label']} | {b['tokenmill_tok_s']:.1f} | {100 * b['tokenmill_mfu']:.1f}% | "
                     f"{b['torch_tok_s']:.1f} | {100 * b['torch_mfu']:.1f}% | "
                     f"{b['tokenmill_tok_s'] / b['torch_tok_s']:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="gpt2,smollm2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work-dir", default=str(Path.home() / ".cache" / "tokenmill-bench"))
    ap.add_argument("--tokenmill", default=str(common.REPO / "build" / "release" / "tokenmill"))
    ap.add_argument("--wait-quiet", type=float, default=600.0)
    ap.add_argument("--quiet-threshold", type=float, default=0.15)
    ap.add_argument("--out", default=str(common.REPO / "bench" / "out" / "train.json"))
    args = ap.parse_args()

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    dirs = common.build_models(Path(args.work_dir), models, ["f32"])
    results = [measure_model(args.tokenmill, m, dirs[(m, "f32")], args) for m in models]
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": shlex.join(["python3", "bench/bench_train.py", *sys.argv[1:]]),
        "commit": common.git_commit(),
        "machine": {"cpu": common.cpu_model(), "flags": common.cpu_flags()},
        "versions": common.versions(),
        "threads": args.threads, "batch": args.batch, "seq_len": args.seq_len, "repeats": args.repeats,
        "results": results,
    }
    common.save_report(args.out, report, render_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
