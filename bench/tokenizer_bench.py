#!/usr/bin/env python3
"""Single-thread encode throughput: Hugging Face `tokenizers` on the texts that
tokenmill's ThroughputReport test uses, for a side-by-side comparison on one machine.

  python3 bench/tokenizer_bench.py [--cpp build/release/tests/tokenizer/tokenizer_robustness_test]

The text is ~2 MiB of mixed text built exactly as tests/tokenizer/robustness_test.cpp
builds it (the parity corpus + Tiny Shakespeare, repeated). HF runs Tokenizer.encode (one
thread, RAYON_NUM_THREADS=1) on the whole text in one call ("whole") and line by line ("lines"); tokenmill's numbers come from running the C++ test
binary's ThroughputReport (when --cpp is given). The real GPT-2 vocabulary is converted
from shared/data/tokenizers/ggml-vocab-gpt-2.gguf into a tokenizer.json (needs `pip
install gguf`) so one comparison uses a full-size vocabulary.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
SHARED = os.path.join(ROOT, "..", "shared", "data")
NAMES = ["gpt2", "llama3", "qwen2", "deepseek", "falcon", "spm_legacy", "spm_metaspace"]


def mixed_text(size):
    with open(os.path.join(FIXTURES, "corpus.json")) as f:
        corpus = b"".join(bytes.fromhex(h) + b"\n" for h in json.load(f)["inputs_hex"])
    shakespeare = b""
    path = os.path.join(SHARED, "corpus", "tinyshakespeare.txt")
    if os.path.exists(path):
        with open(path, "rb") as f:
            shakespeare = f.read()[:400000]
    text = b""
    while len(text) < size:
        text += corpus + shakespeare
    return text[:size].decode("utf-8", errors="replace")


def gpt2_from_gguf():
    try:
        import gguf
    except ImportError:
        return None
    r = gguf.GGUFReader(os.path.join(SHARED, "tokenizers", "ggml-vocab-gpt-2.gguf"))
    field = lambda k: r.fields[k]
    toks = [bytes(field("tokenizer.ggml.tokens").parts[i]).decode() for i in field("tokenizer.ggml.tokens").data]
    merges = [bytes(field("tokenizer.ggml.merges").parts[i]).decode() for i in field("tokenizer.ggml.merges").data]
    doc = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(toks)}, "merges": merges}}
    return Tokenizer.from_str(json.dumps(doc))


def time_encode(tok, text, per_line, repeats=3):
    tok.encode_special_tokens = True  # special tokens in the text are plain text, as in tokenmill
    pieces = text.splitlines(keepends=True) if per_line else [text]
    tok.encode(text[:100000])
    best = float("inf")
    n = 0
    for _ in range(repeats):
        start = time.perf_counter()
        n = sum(len(tok.encode(p, add_special_tokens=False).ids) for p in pieces)
        best = min(best, time.perf_counter() - start)
    return len(text.encode()) / 1048576 / best, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpp", help="tokenizer_robustness_test binary to run for tokenmill's numbers")
    args = ap.parse_args()
    text = mixed_text(2 << 20)
    ours = {}
    if args.cpp:
        out = subprocess.run([args.cpp, "--gtest_filter=*ThroughputReport*"], capture_output=True, text=True).stdout
        for m in re.finditer(r"encode (\S+) (whole|lines): ([0-9.]+) MiB/s, (\d+) tokens", out):
            ours[(m.group(1), m.group(2))] = (float(m.group(3)), int(m.group(4)))
    print(f"{'tokenizer':<18}{'mode':<7}{'HF MiB/s':>10}{'tokenmill MiB/s':>17}{'ratio':>8}{'tokens':>10}")
    rows = [(n, Tokenizer.from_file(os.path.join(FIXTURES, n, "tokenizer.json"))) for n in NAMES]
    real = gpt2_from_gguf()
    if real is not None:
        rows.append(("gpt2-real", real))
    for name, tok in rows:
        for mode in ("whole", "lines"):
            hf, count = time_encode(tok, text, mode == "lines")
            mine = ours.get((name, mode))
            ratio = f"{mine[0] / hf:.1f}x" if mine else "-"
            print(f"{name:<18}{mode:<7}{hf:>10.2f}{(f'{mine[0]:.2f}' if mine else '-'):>17}{ratio:>8}{count:>10}")
            if mine and mine[1] != count:
                print(f"  warning: token counts differ ({mine[1]} vs {count})")


if __name__ == "__main__":
    main()
