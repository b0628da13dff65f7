#!/usr/bin/env python3
"""One training-throughput row for compare.py, from `tokenmill bench --json` (its train phase:
tokens/s and MFU against the bf16 GEMM calibrated in the same run) or from
bench/torch_train_peer.py's JSON (tokens/s).

usage: train_rows.py NAME FILE   prints {"name", "tokens_per_s"[, "share_of_roofline"]}
"""
import json
import sys


def main():
    name, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        report = json.load(f)
    phase = next(p for p in report["phases"] if p["phase"] == "train")
    row = {"name": name, "tokens_per_s": phase["tokens_per_s"]}
    if "mfu" in phase:
        row["share_of_roofline"] = phase["mfu"]
    print(json.dumps(row))


if __name__ == "__main__":
    main()
