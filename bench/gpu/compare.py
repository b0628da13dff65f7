#!/usr/bin/env python3
"""Joins gpu_ops_bench's and torch_peer.py's JSON lines into one markdown table.

Columns: each side's median ms per call, our TFLOP/s and GB/s, speed-up (PyTorch ms / our ms:
above 1 we are faster) and our share of the roofline measured in the same run: GB/s over the
copy bandwidth for memory-bound rows (decode matmul n <= 64, attention decode, norms), TFLOP/s
over PyTorch's best bf16 matmul rate for the compute-bound ones.

Rows with tokens_per_s (gpu_model_bench vs transformers_peer.py) get a tokens/s table instead:
speed-up = our tokens/s over transformers'.

usage: compare.py OURS.jsonl PEER.jsonl [--title TITLE] [--json FIGURES.json]
  --json appends {"title", "rows"} (each row: ours and the peer's figures, and the speed-up) to
  the list in FIGURES.json (made if missing): one file of every figure of a gpu-check run.
"""
import argparse
import json
import os
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                row = json.loads(line)
                rows[row["name"]] = row
    return rows


def memory_bound(name):
    if name.startswith("matmul"):
        return int(name.split("n=")[1].split()[0]) <= 64
    return "n=1 " in name or name.startswith("rms_norm") or name.startswith("copy")


def model_table(ours, peer, peer_name):
    """Rows with tokens_per_s (gpu_model_bench vs transformers_peer.py, training vs PyTorch)."""
    print(f"| phase | tokenmill tok/s | {peer_name} tok/s | speed-up | share of roofline |")
    print("| --- | ---: | ---: | ---: | ---: |")
    figures = []
    for name, row in ours.items():
        other = peer.get(name)
        speedup = row["tokens_per_s"] / other["tokens_per_s"] if other else None
        theirs = f"{other['tokens_per_s']:.1f}" if other else "-"
        share = f"{100 * row['share_of_roofline']:.0f}%" if "share_of_roofline" in row else "-"
        print(f"| {name} | {row['tokens_per_s']:.1f} | {theirs} | {f'{speedup:.2f}x' if speedup else '-'} | {share} |")
        figures.append({"name": name, "ours": row, "peer": other, "speedup": speedup})
    return figures


def ops_table(ours, peer):
    copy_gbps = ours.get("copy 2GiB", {}).get("gbps", 0)
    gemm_peak = max((r["tflops"] for n, r in peer.items() if n.startswith("matmul")), default=0)
    print(f"roofline (same run): copy {copy_gbps:.0f} GB/s; bf16 GEMM {gemm_peak:.0f} TFLOP/s (PyTorch's best matmul)")
    print("| op | tokenmill ms | PyTorch ms | speed-up | TFLOP/s | GB/s | % of roofline |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    figures = []
    for name, row in ours.items():
        other = peer.get(name)
        speedup = f"{other['ms'] / row['ms']:.2f}x" if other else "-"
        peer_ms = f"{other['ms']:.4f}" if other else "-"
        if memory_bound(name):
            share = row["gbps"] / copy_gbps if copy_gbps else 0
        else:
            share = row["tflops"] / gemm_peak if gemm_peak else 0
        print(f"| {name} | {row['ms']:.4f} | {peer_ms} | {speedup} | {row['tflops']:.1f} | {row['gbps']:.0f} "
              f"| {100 * share:.0f}% |")
        figures.append({"name": name, "ours": row, "peer": other,
                        "speedup": other["ms"] / row["ms"] if other else None, "share_of_roofline": share})
    return figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("peer")
    ap.add_argument("--title", default="")
    ap.add_argument("--peer-name", default="transformers")
    ap.add_argument("--json", dest="json_path")
    args = ap.parse_args()
    ours, peer = load(args.ours), load(args.peer)
    if args.title:
        print(f"{args.title}\n")
    if any("tokens_per_s" in row for row in ours.values()):
        rows = model_table(ours, peer, args.peer_name)
    else:
        rows = ops_table(ours, peer)
    if args.json_path:
        tables = []
        if os.path.exists(args.json_path):
            with open(args.json_path) as f:
                tables = json.load(f)
        tables.append({"title": args.title, "rows": rows})
        with open(args.json_path, "w") as f:
            json.dump(tables, f, indent=1)


if __name__ == "__main__":
    main()
