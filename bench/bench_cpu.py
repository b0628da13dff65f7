#!/usr/bin/env python3
"""Side-by-side CPU benchmark: tokenmill vs transformers (PyTorch) on the same machine,
the same models and the same thread count, in one run.

For each model (random weights, built from a config only, no hub access) and each
storage dtype it measures
  * prefill pp512: tokens/s of processing a 512-token prompt,
  * decode tg128:  tokens/s of greedy decoding 128 tokens after that prompt,
and relates decode to the memory-bandwidth roofline of this machine (weight bytes read per
token / measured read bandwidth) and prefill to the FLOPs it needs.

Usage:
  python3 bench/bench_cpu.py [--threads 2] [--models gpt2,smollm2] [--dtypes f32,bf16]
                             [--repeats 3] [--work-dir DIR] [--tokenmill build/release/tokenmill]
                             [--no-mmap] [--skip-transformers] [--out bench/out/cpu.json]

Timing rules (the same for both engines):
  * every figure is the BEST of --repeats timed runs, after at least one untimed warm-up,
    and each timed run follows an untimed one in the same process (transformers: its loop;
    tokenmill: `generate --warmup`), so both engines are timed warm, as a server runs;
  * prefill tok/s = 512 / wall time of the forward pass over the prompt (only the logits of
    the last position are computed, as generation does);
  * decode tok/s = (generated tokens - 1) / wall time from the first sampled token to the
    last one: the first token comes out of the prefill, each later one costs one forward
    pass of one token with the KV cache plus a greedy argmax. tokenmill reports exactly this
    as decode_tokens_per_s; for transformers a manual loop with past_key_values does the same
    127 steps (a best case for transformers: no generate() bookkeeping).
  * the decode roofline = best read bandwidth sampled during the run (at the start, before
    each model, at the end) / weight bytes read per token (all matmul weights + the logits
    matrix once; the f32 KV-cache reads are reported in the JSON, not in the roofline);
  * the machine is shared: each measurement waits for other processes to go idle and is
    repeated (--retries) if they disturbed it; the background load is recorded.
Correctness on the side: the greedy tokens of both engines are compared; for bf16 files
also against transformers with f32 math on the same bf16 weights (tokenmill's arithmetic).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import multiprocessing
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROMPT_TOKENS = 512
NEW_TOKENS = 128
SEED = 1234

# Shapes of the two reference models (random weights; only the shapes matter for speed).
MODEL_SPECS = {
    "gpt2": {
        "label": "GPT-2 124M",
        "kind": "gpt2",
        "config": dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024),
    },
    "smollm2": {
        "label": "SmolLM2-135M (Llama)",
        "kind": "llama",
        "config": dict(
            vocab_size=49152,
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            max_position_embeddings=8192,
            rope_theta=100000.0,
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
            bos_token_id=1,
            eos_token_id=2,
        ),
    },
}
DTYPES = {"f32": "float32", "bf16": "bfloat16"}
BYTES_PER_ELEMENT = {"f32": 4, "bf16": 2}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Model building
# --------------------------------------------------------------------------------------


def make_config(name: str):
    import transformers

    spec = MODEL_SPECS[name]
    if spec["kind"] == "gpt2":
        return transformers.GPT2Config(**spec["config"])
    return transformers.LlamaConfig(**spec["config"])


def build_models(work_dir: Path, models: list[str], dtypes: list[str]) -> dict[tuple[str, str], Path]:
    """Builds (or reuses) one safetensors directory per (model, dtype)."""
    import torch
    import transformers

    dirs = {}
    for name in models:
        wanted = {dt: work_dir / f"{name}-{dt}" for dt in dtypes}
        for dt, d in wanted.items():
            dirs[(name, dt)] = d
        missing = [dt for dt, d in wanted.items() if not (d / "BUILT").exists()]
        if not missing:
            continue
        log(f"building random-weight {name} ({', '.join(missing)}) in {work_dir}")
        torch.manual_seed(SEED)
        config = make_config(name)
        cls = transformers.GPT2LMHeadModel if MODEL_SPECS[name]["kind"] == "gpt2" else transformers.LlamaForCausalLM
        model = cls(config).eval()
        for dt in missing:
            d = wanted[dt]
            if d.exists():
                shutil.rmtree(d)
            model.to(getattr(torch, DTYPES[dt])).save_pretrained(d, safe_serialization=True)
            (d / "BUILT").write_text(f"seed {SEED}, transformers {transformers.__version__}\n")
        del model
    return dirs


def weight_stats(name: str, dt: str) -> dict:
    """Counts the bytes a decode step must read and the FLOPs of a prefill."""
    c = MODEL_SPECS[name]["config"]
    if MODEL_SPECS[name]["kind"] == "gpt2":
        d, layers, heads, vocab = c["n_embd"], c["n_layer"], c["n_head"], c["vocab_size"]
        head_dim, kv_heads, ff = d // heads, heads, 4 * d
        per_layer = d * 3 * d + d * d + d * ff + ff * d  # qkv, o, fc, proj
    else:
        d, layers, heads, vocab = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["vocab_size"]
        head_dim, kv_heads, ff = d // heads, c["num_key_value_heads"], c["intermediate_size"]
        q, kv = heads * head_dim, kv_heads * head_dim
        per_layer = d * q + 2 * d * kv + q * d + 3 * d * ff  # q, k, v, o, gate, up, down
    layer_params = layers * per_layer
    lm_head_params = vocab * d  # tied or not, the logits read this matrix once per token
    elem = BYTES_PER_ELEMENT[dt]
    t = PROMPT_TOKENS
    # Causal attention: QK^T and PV over the lower triangle, 2 FLOPs per multiply-add.
    attn_flops = layers * 2 * 2 * heads * head_dim * (t * (t + 1) // 2)
    prefill_flops = 2 * layer_params * t + attn_flops + 2 * lm_head_params  # logits of the last token only
    # KV bytes a decode step reads on average over tg128 after pp512 (f32 cache assumed).
    mean_ctx = t + NEW_TOKENS / 2
    kv_bytes = layers * 2 * kv_heads * head_dim * mean_ctx * 4
    return {
        "matmul_params_per_token": layer_params + lm_head_params,
        "decode_weight_bytes": (layer_params + lm_head_params) * elem,
        "decode_kv_bytes_f32_mean": kv_bytes,
        "prefill_flops": prefill_flops,
    }


# --------------------------------------------------------------------------------------
# Machine facts
# --------------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                keep = [f for f in flags if f in ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16")]
                return " ".join(keep)
    except OSError:
        pass
    return ""


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        if head.returncode != 0:
            return "no commit yet (uncommitted working tree)"
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True)
        commit = head.stdout.strip()
        if dirty.stdout.strip():
            return f"uncommitted working tree on top of {commit}"
        return commit
    except OSError:
        return "unknown (git not available)"


def versions() -> dict:
    out = {"python": platform.python_version()}
    for mod in ("torch", "transformers", "numpy", "safetensors"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing module is just reported
            out[mod] = "not installed"
    try:
        cc = subprocess.run(["c++", "--version"], capture_output=True, text=True)
        out["compiler"] = cc.stdout.splitlines()[0] if cc.returncode == 0 and cc.stdout else "unknown"
    except OSError:
        out["compiler"] = "unknown"
    return out


# --------------------------------------------------------------------------------------
# Background load: this machine is shared, and with 2 cores a single foreign compile job
# (or OpenMP threads spinning against it) can slow a 2-thread run down tenfold. Every
# measurement records how many cores something other than this benchmark kept busy.
# --------------------------------------------------------------------------------------


class CpuMeter:
    """Cores kept busy by other processes (and hypervisor steal) between start() and stop()."""

    CLK = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _busy_seconds() -> float:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        return (user + nice + system + irq + softirq + steal) / CpuMeter.CLK

    @staticmethod
    def _own_seconds() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def start(self) -> "CpuMeter":
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy_seconds(), self._own_seconds()
        return self

    def stop(self) -> float:
        wall = time.perf_counter() - self.t0
        foreign = (self._busy_seconds() - self.busy0) - (self._own_seconds() - self.own0)
        return max(0.0, foreign / wall) if wall > 0 else 0.0


def wait_for_quiet(max_wait_s: float, threshold: float) -> float:
    """Waits (up to max_wait_s) until other processes use less than `threshold` cores over 3 s."""
    deadline = time.time() + max_wait_s
    while True:
        m = CpuMeter().start()
        time.sleep(3)
        load = m.stop()
        if load < threshold:
            return load
        if time.time() >= deadline:
            log(f"WARNING: the machine is busy ({load:.2f} cores used by other processes); measuring anyway")
            return load
        log(f"machine busy ({load:.2f} cores used by other processes); waiting for it to go quiet")
        time.sleep(7)


# --------------------------------------------------------------------------------------
# Read bandwidth
# --------------------------------------------------------------------------------------

BANDWIDTH_PATTERN = re.compile(r"bandwidth|read_?bw|mem_?read|stream_?read", re.IGNORECASE)


def find_kernel_bench(explicit: str | None) -> Path | None:
    if explicit:
        p = Path(explicit)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    bench_dir = REPO / "build" / "release" / "bench"
    for name in ("bench_kernels", "tokenmill_bench", "bench_cpu_kernels", "kernels_bench"):
        p = bench_dir / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    if bench_dir.is_dir():
        for p in sorted(bench_dir.iterdir()):
            if p.is_file() and os.access(p, os.X_OK) and p.name.startswith("bench"):
                return p
    return None


def bandwidth_cpp(binary: Path, threads: int) -> dict | None:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    try:
        listed = subprocess.run([str(binary), "--benchmark_list_tests=true"], capture_output=True, text=True,
                                env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"kernel bench {binary} could not list its tests: {e}")
        return None
    names = [n for n in listed.stdout.split() if BANDWIDTH_PATTERN.search(n)]
    if listed.returncode != 0 or not names:
        log(f"kernel bench {binary} has no read-bandwidth benchmark; falling back")
        return None
    # Prefer entries that name the thread count (".../threads:2" or "/2" as the last arg).
    with_threads = [n for n in names if re.search(rf"(threads:{threads}\b|/{threads}$)", n)]
    chosen = with_threads or names
    regex = "^(" + "|".join(re.escape(n) for n in chosen) + ")$"
    try:
        run = subprocess.run([str(binary), f"--benchmark_filter={regex}", "--benchmark_format=json",
                              "--benchmark_repetitions=5"],
                             capture_output=True, text=True, env=env, timeout=300)
        data = json.loads(run.stdout)
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        log(f"kernel bench {binary} failed: {e}")
        return None
    rows = [b for b in data.get("benchmarks", []) if "bytes_per_second" in b and b.get("run_type") != "aggregate"]
    if not rows:
        return None
    best = max(rows, key=lambda b: b["bytes_per_second"])
    if "threads" in best and int(best["threads"]) != threads:
        log(f"kernel bench ran {best['name']} with {best['threads']} threads, not {threads}; falling back")
        return None
    return {
        "bytes_per_second": float(best["bytes_per_second"]),
        "method": f"C++ kernel benchmark {binary.relative_to(REPO) if binary.is_relative_to(REPO) else binary} "
                  f"'{best['name']}' (OMP_NUM_THREADS={threads}, best of 5 repetitions)",
    }


def _sum_worker(args):
    """Sums its own 512 MiB array `reps` times after a barrier; returns seconds per sum."""
    nbytes, reps, barrier = args
    import numpy as np

    a = np.ones(nbytes // 8, dtype=np.float64)
    a.sum()  # fault the pages in
    barrier.wait()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t0)
    return best


def bandwidth_numpy(threads: int) -> dict:
    nbytes, reps = 512 << 20, 5
    ctx = multiprocessing.get_context("fork")
    with multiprocessing.Manager() as manager:
        barrier = manager.Barrier(threads)
        with ctx.Pool(threads) as pool:
            times = pool.map(_sum_worker, [(nbytes, reps, barrier)] * threads)
    # Each process reads its own array; the aggregate is the sum of the per-process rates.
    total = sum(nbytes / t for t in times)
    return {
        "bytes_per_second": total,
        "method": f"numpy: {threads} processes each summing its own 512 MiB float64 array, best of {reps}, rates added",
    }


def bandwidth_torch(threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    a = torch.ones((1 << 30) // 4, dtype=torch.float32)
    a.sum()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t0)
    del a
    return {"bytes_per_second": (1 << 30) / best,
            "method": f"torch.sum over a 1 GiB float32 tensor, {threads} threads, best of 5"}


def measure_bandwidth(threads: int, kernel_bench: str | None) -> dict:
    meter = CpuMeter().start()
    result = _measure_bandwidth(threads, kernel_bench)
    result["background_cores"] = meter.stop()
    return result


def _measure_bandwidth(threads: int, kernel_bench: str | None) -> dict:
    binary = find_kernel_bench(kernel_bench)
    if binary is not None:
        r = bandwidth_cpp(binary, threads)
        if r is not None:
            return r
    else:
        log("no C++ kernel benchmark binary found (build/release/bench/*); measuring with numpy and torch")
    a = bandwidth_numpy(threads)
    b = bandwidth_torch(threads)
    best = a if a["bytes_per_second"] >= b["bytes_per_second"] else b
    other = b if best is a else a
    best = dict(best)
    best["method"] += f" (higher of two fallbacks; the other, {other['method']}, gave {other['bytes_per_second'] / 1e9:.1f} GB/s)"
    return best


# --------------------------------------------------------------------------------------
# Page sizes of the model files
# --------------------------------------------------------------------------------------


def huge_page_share(paths: list[Path]) -> float | None:
    """The share of the files' bytes that a fresh read-only mapping gets on 2 MiB pages.

    Decode streams the weights from the page cache, which every engine here maps; where the
    kernel keeps a file in 2 MiB folios the mapping gets huge pages (tokenmill asks for them,
    so the pages it reads in from disk come that way), and streaming it is faster than over
    4 KiB pages (bf16 GEMVs on a 2-core Xeon VM: 27-32 vs 21-25 GB/s). That state belongs to
    the run, not to an engine, so it is reported next to the figures. None where
    /proc/self/smaps cannot say.
    """
    import mmap

    total = huge = 0
    for path in paths:
        real = str(path.resolve())
        with open(real, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            for offset in range(0, len(m), mmap.PAGESIZE):
                _ = m[offset]  # fault every page in, as a decode does
            try:
                smaps = Path("/proc/self/smaps").read_text().splitlines()
            except OSError:
                return None
            inside = False
            for line in smaps:
                head = line.split()
                if head and "-" in head[0] and ":" not in head[0]:
                    inside = line.endswith(real)
                elif inside and head[0] == "FilePmdMapped:":
                    huge += int(head[1]) * 1024
            total += len(m)
    return huge / total if total else None


# --------------------------------------------------------------------------------------
# tokenmill
# --------------------------------------------------------------------------------------


def run_tokenmill(binary: Path, model_dir: Path, prompt: list[int], threads: int, repeats: int,
                  extra_args: tuple[str, ...] = ()) -> dict:
    cmd = [str(binary), "-t", str(threads), "generate", "-m", str(model_dir), "--prompt-ids",
           ",".join(map(str, prompt)), "-n", str(NEW_TOKENS), "--temperature", "0", "--ignore-eos", "--warmup",
           "--json", *extra_args]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    runs = []
    # One untimed warm-up process (faults the mapped weights in), then the timed repeats. Each
    # process also runs the prompt once untimed (--warmup) before its timed run: the peers are
    # timed warm, inside the process that warmed them up, and so is tokenmill.
    for i in range(repeats + 1):
        t0, meter = time.perf_counter(), CpuMeter().start()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        wall, foreign = time.perf_counter() - t0, meter.stop()
        if proc.returncode != 0:
            raise RuntimeError(f"tokenmill exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        lines = [l for l in proc.stdout.splitlines() if l.strip().startswith("{")]
        if not lines:
            raise RuntimeError(f"tokenmill printed no JSON: {proc.stdout[-500:]} {proc.stderr[-500:]}")
        out = json.loads(lines[-1])
        out["wall_s"], out["background_cores"] = wall, foreign
        if len(out.get("ids", [])) != NEW_TOKENS:
            raise RuntimeError(f"tokenmill generated {len(out.get('ids', []))} tokens, expected {NEW_TOKENS}")
        if i > 0:
            runs.append(out)
        log(f"  tokenmill run {i}{' (warm-up)' if i == 0 else ''}: pp {out['prompt_tokens_per_s']:.1f} tok/s, "
            f"tg {out['decode_tokens_per_s']:.2f} tok/s, process wall {wall:.1f} s, "
            f"background load {foreign:.2f} cores")
    pp = [r["prompt_tokens_per_s"] for r in runs]
    tg = [r["decode_tokens_per_s"] for r in runs]
    return {
        "prefill_tok_s": max(pp),
        "decode_tok_s": max(tg),
        "prefill_tok_s_all": pp,
        "decode_tok_s_all": tg,
        "prefill_tok_s_median": statistics.median(pp),
        "decode_tok_s_median": statistics.median(tg),
        "process_wall_s_all": [r["wall_s"] for r in runs],
        "background_cores": max(r["background_cores"] for r in runs),
        "ids": runs[-1]["ids"],
        "deterministic": all(r["ids"] == runs[0]["ids"] for r in runs),
    }


# --------------------------------------------------------------------------------------
# transformers
# --------------------------------------------------------------------------------------


def run_transformers(model_dir: Path, dt: str, prompt: list[int], threads: int, repeats: int) -> dict:
    import torch
    import transformers

    torch.set_num_threads(threads)
    dtype = getattr(torch, DTYPES[dt])
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    assert next(model.parameters()).dtype == dtype
    ids = torch.tensor([prompt], dtype=torch.long)
    steps = NEW_TOKENS - 1

    # transformers >= 5.2x calls the KV cache `cache`; older versions `past_key_values`.
    import inspect

    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def prefill():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        return getattr(out, cache_kw), out.logits[:, -1, :]

    def decode(past, logits, n):
        tokens = [int(torch.argmax(logits, dim=-1))]
        nxt = torch.tensor([[tokens[0]]], dtype=torch.long)
        for _ in range(n):
            out = model(input_ids=nxt, use_cache=True, **{cache_kw: past})
            past = getattr(out, cache_kw)
            tok = int(torch.argmax(out.logits[:, -1, :], dim=-1))
            tokens.append(tok)
            nxt = torch.tensor([[tok]], dtype=torch.long)
        return tokens

    pp_times, tg_times, tokens = [], [], None
    with torch.inference_mode():
        past, logits = prefill()  # warm-up
        decode(past, logits, 8)
        meter = CpuMeter().start()
        for _ in range(repeats):
            t0 = time.perf_counter()
            past, logits = prefill()
            pp_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tokens = decode(past, logits, steps)
            tg_times.append(time.perf_counter() - t0)
        foreign = meter.stop()
        # Reference tokens for a low-precision file: the same weights with f32 math (tokenmill
        # keeps f32 math over bf16 storage; transformers in bf16 also rounds activations).
        ref_tokens = None
        if dtype != torch.float32:
            model.float()
            past, logits = prefill()
            ref_tokens = decode(past, logits, steps)
    del model
    pp = [PROMPT_TOKENS / t for t in pp_times]
    tg = [steps / t for t in tg_times]
    log(f"  transformers: pp {max(pp):.1f} tok/s, tg {max(tg):.2f} tok/s (best of {repeats}), "
        f"background load {foreign:.2f} cores")
    return {
        "prefill_tok_s": max(pp),
        "decode_tok_s": max(tg),
        "prefill_tok_s_all": pp,
        "decode_tok_s_all": tg,
        "prefill_tok_s_median": statistics.median(pp),
        "decode_tok_s_median": statistics.median(tg),
        "background_cores": foreign,
        "ids": tokens,
        "ids_f32_math": ref_tokens,
    }


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def fmt_num(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def fmt_ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def matching_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def render_markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        f"CPU benchmark (these are CPU figures), {report['date']}",
        "",
        f"- machine: {m['cpu']} ({m['logical_cpus']} logical CPUs; flags: {m['cpu_flags']}), "
        f"{report['threads']} threads for every engine; tokenmill's weights "
        f"{report.get('tokenmill_weights', 'mapped in place')}, transformers' copied at load",
        f"- read bandwidth: {m['bandwidth_gb_s']:.1f} GB/s, the best of {len(m['bandwidth_gb_s_samples'])} samples "
        f"taken at the start, before each model and at the end "
        f"({min(m['bandwidth_gb_s_samples']):.1f} to {max(m['bandwidth_gb_s_samples']):.1f} GB/s); "
        f"each sample: {m['bandwidth_method']}",
        f"- commit: {report['commit']}"
        + (f"; tokenmill binary built {report['tokenmill_binary']['mtime']} (sha256 {report['tokenmill_binary']['sha256']}...)"
           if report.get("tokenmill_binary") else ""),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        f"- command: `{report['command']}`",
        f"- timing: best of {report['repeats']} after a warm-up; pp512 = 512-token prompt, tg128 = 128 greedy tokens "
        "after it (decode rate over the 127 tokens after the first)",
        "",
        "| model | dtype | tokenmill pp512 tok/s | transformers pp512 tok/s | ratio | tokenmill tg128 tok/s "
        "| transformers tg128 tok/s | ratio | decode roofline tok/s | tokenmill % of roofline |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        tm, hf = r.get("tokenmill") or {}, r.get("transformers") or {}
        tm_tg = tm.get("decode_tok_s")
        pct = f"{100 * tm_tg / r['decode_roofline_tok_s']:.0f}%" if tm_tg else "n/a"
        lines.append(
            f"| {r['label']} | {r['dtype']} | {fmt_num(tm.get('prefill_tok_s'))} | {fmt_num(hf.get('prefill_tok_s'))} "
            f"| {fmt_ratio(tm.get('prefill_tok_s'), hf.get('prefill_tok_s'))} | {fmt_num(tm_tg, 2)} "
            f"| {fmt_num(hf.get('decode_tok_s'), 2)} | {fmt_ratio(tm_tg, hf.get('decode_tok_s'))} "
            f"| {fmt_num(r['decode_roofline_tok_s'])} | {pct} |")
    lines += [
        "",
        "| model | dtype | weight bytes / decoded token | prefill GFLOP | tokenmill prefill GFLOP/s "
        "| transformers prefill GFLOP/s | transformers % of roofline | tokenmill = transformers greedy tokens (of 128) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        tm, hf = r.get("tokenmill") or {}, r.get("transformers") or {}
        gf = r["prefill_flops"] / 1e9
        hf_tg = hf.get("decode_tok_s")
        agree = r.get("greedy_prefix_match")
        ref = r.get("greedy_prefix_match_f32_math")
        agree_ref = "" if ref is None else f"; first {ref} equal to transformers with f32 math on the same weights"
        hf_pct = f"{100 * hf_tg / r['decode_roofline_tok_s']:.0f}%" if hf_tg else "n/a"
        lines.append(
            f"| {r['label']} | {r['dtype']} | {r['decode_weight_bytes'] / 1e6:.1f} MB | {gf:.1f} "
            f"| {fmt_num(gf * tm['prefill_tok_s'] / PROMPT_TOKENS) if tm else 'n/a'} "
            f"| {fmt_num(gf * hf['prefill_tok_s'] / PROMPT_TOKENS) if hf else 'n/a'} "
            f"| {hf_pct} "
            f"| {'n/a' if agree is None else f'first {agree} equal'}{agree_ref} |")
    shares = [f"{r['label']} {r['dtype']} {100 * r['huge_page_share']:.0f}%" for r in report["results"]
              if r.get("huge_page_share") is not None]
    if shares:
        lines += ["", "Model files on 2 MiB pages (a fresh mapping after the runs): " + ", ".join(shares)]
    disturbed = []
    for r in report["results"]:
        for engine in ("tokenmill", "transformers"):
            load = (r.get(engine) or {}).get("background_cores")
            if load is not None and load > report["quiet_threshold"]:
                disturbed.append(f"{r['label']} {r['dtype']} {engine} ({load:.2f} cores)")
    if m["bandwidth_background_cores"] > report["quiet_threshold"]:
        disturbed.append(f"read bandwidth ({m['bandwidth_background_cores']:.2f} cores)")
    if disturbed:
        lines += ["", "WARNING: other processes used CPU during these measurements (those figures are not reliable): "
                  + "; ".join(disturbed)]
    else:
        lines += ["", f"Background load stayed under {report['quiet_threshold']} cores during every measurement."]
    errors = [f"- {r['label']} {r['dtype']}: {e}" for r in report["results"] for e in r.get("errors", [])]
    if errors:
        lines += ["", "Errors:"] + errors
    return "\n".join(lines) + "\n"


def save_report(out: str, report: dict, markdown: str) -> None:
    """Writes the report to `out` (JSON) and its table beside it (.md), and prints the table."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown)
    print(markdown)


def measure_quietly(what: str, measure, args) -> dict:
    """Runs `measure` on a quiet machine; if other processes disturbed it, tries again (up to
    --retries more times) and keeps the least disturbed attempt."""
    best = None
    for attempt in range(args.retries + 1):
        wait_for_quiet(args.wait_quiet, args.quiet_threshold)
        log(f"{what}{f' (retry {attempt})' if attempt else ''}")
        result = measure()
        result["attempts"] = attempt + 1
        if best is None or result["background_cores"] < best["background_cores"]:
            best = result
        if result["background_cores"] <= args.quiet_threshold:
            break
        log(f"  disturbed: other processes used {result['background_cores']:.2f} cores")
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="gpt2,smollm2")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work-dir", default=str(Path.home() / ".cache" / "tokenmill-bench"))
    ap.add_argument("--tokenmill", default=str(REPO / "build" / "release" / "tokenmill"))
    ap.add_argument("--kernel-bench", default=None, help="C++ kernel benchmark binary (default: look in build/release/bench)")
    ap.add_argument("--no-mmap", action="store_true",
                    help="tokenmill copies the weights at load (generate --no-mmap), as transformers always does, "
                         "instead of reading the mapped files in place")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--skip-tokenmill", action="store_true")
    ap.add_argument("--wait-quiet", type=float, default=600.0,
                    help="before each measurement wait up to this many seconds for other processes to go idle")
    ap.add_argument("--quiet-threshold", type=float, default=0.15,
                    help="cores other processes may use for the machine to count as quiet")
    ap.add_argument("--retries", type=int, default=2,
                    help="repeat a measurement disturbed by other processes up to this many times")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "cpu.json"))
    args = ap.parse_args()

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for m in models:
        if m not in MODEL_SPECS:
            ap.error(f"unknown model '{m}' (known: {', '.join(MODEL_SPECS)})")
    for d in dtypes:
        if d not in DTYPES:
            ap.error(f"unknown dtype '{d}' (known: {', '.join(DTYPES)})")
    if args.threads < 1 or args.repeats < 1:
        ap.error("--threads and --repeats must be >= 1")

    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch is imported
    import torch

    torch.set_num_threads(args.threads)

    tokenmill = Path(args.tokenmill)
    if not tokenmill.is_absolute():
        tokenmill = (Path.cwd() / tokenmill).resolve()
    if not args.skip_tokenmill and not (tokenmill.is_file() and os.access(tokenmill, os.X_OK)):
        log(f"tokenmill binary not found at {tokenmill}: build it with "
            "`cmake --preset release && cmake --build build/release --target tokenmill` (or pass --skip-tokenmill)")
        return 2

    work_dir = Path(args.work_dir).expanduser().resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    commit = git_commit()  # the tree the binaries were built from, as of now
    tokenmill_info = None
    if not args.skip_tokenmill:
        # Others may rebuild build/release while this runs: measure a private copy.
        pinned = work_dir / "tokenmill.pinned"
        shutil.copy2(tokenmill, pinned)
        tokenmill_info = {"path": str(tokenmill), "mtime": datetime.datetime.fromtimestamp(
            tokenmill.stat().st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "sha256": hashlib.sha256(pinned.read_bytes()).hexdigest()[:16]}
        tokenmill = pinned
    tokenmill_args = ("--no-mmap",) if args.no_mmap else ()
    dirs = build_models(work_dir, models, dtypes)

    bw = measure_quietly(f"read bandwidth with {args.threads} threads",
                         lambda: measure_bandwidth(args.threads, args.kernel_bench), args)
    log(f"  {bw['bytes_per_second'] / 1e9:.1f} GB/s via {bw['method']}")
    bandwidth_samples = [bw]

    import random

    results = []
    for name in models:
        vocab = MODEL_SPECS[name]["config"]["vocab_size"]
        rng = random.Random(SEED)
        prompt = [rng.randrange(3, vocab) for _ in range(PROMPT_TOKENS)]
        for dt in dtypes:
            d = dirs[(name, dt)]
            stats = weight_stats(name, dt)
            entry = {
                "model": name,
                "label": MODEL_SPECS[name]["label"],
                "dtype": dt,
                "model_dir": str(d),
                **stats,
                "decode_roofline_tok_s": bw["bytes_per_second"] / stats["decode_weight_bytes"],
                "tokenmill": None,
                "transformers": None,
                "errors": [],
            }
            # Memory bandwidth on a shared host drifts (by up to 2x here): sample it next to
            # every model, and take the roofline from the best sample of the whole run.
            sample = measure_quietly(f"read bandwidth before {name} {dt}",
                                     lambda: measure_bandwidth(args.threads, args.kernel_bench), args)
            entry["bandwidth_gb_s_before"] = sample["bytes_per_second"] / 1e9
            bandwidth_samples.append(sample)
            engines = []
            if not args.skip_tokenmill:
                engines.append(("tokenmill", lambda: run_tokenmill(tokenmill, d, prompt, args.threads, args.repeats,
                                                                               tokenmill_args)))
            if not args.skip_transformers:
                engines.append(("transformers", lambda: run_transformers(d, dt, prompt, args.threads, args.repeats)))
            for engine, measure in engines:
                try:
                    entry[engine] = measure_quietly(f"{name} {dt}: {engine}", measure, args)
                except Exception as e:  # noqa: BLE001 - recorded in the report, the run goes on
                    log(f"  {engine} FAILED: {e}")
                    entry["errors"].append(f"{engine}: {e}")
            entry["huge_page_share"] = huge_page_share(sorted(d.glob("*.safetensors")))
            if entry["tokenmill"] and not entry["tokenmill"]["deterministic"]:
                entry["errors"].append("tokenmill greedy output differed between repeats")
            if entry["tokenmill"] and entry["transformers"]:
                entry["greedy_prefix_match"] = matching_prefix(entry["tokenmill"]["ids"], entry["transformers"]["ids"])
                if entry["transformers"].get("ids_f32_math"):
                    entry["greedy_prefix_match_f32_math"] = matching_prefix(entry["tokenmill"]["ids"],
                                                                            entry["transformers"]["ids_f32_math"])
            results.append(entry)

    bandwidth_samples.append(measure_quietly(f"read bandwidth with {args.threads} threads (again, at the end)",
                                             lambda: measure_bandwidth(args.threads, args.kernel_bench), args))
    # The roofline is what the machine can do at best: the highest sample of the run.
    bw = max(bandwidth_samples, key=lambda b: b["bytes_per_second"])
    log("read bandwidth samples: " + ", ".join(f"{b['bytes_per_second'] / 1e9:.1f}" for b in bandwidth_samples)
        + f" GB/s; roofline from {bw['bytes_per_second'] / 1e9:.1f}")
    for entry in results:
        entry["decode_roofline_tok_s"] = bw["bytes_per_second"] / entry["decode_weight_bytes"]

    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "threads": args.threads,
        "tokenmill_weights": "copied at load (--no-mmap)" if args.no_mmap else "mapped in place",
        "repeats": args.repeats,
        "quiet_threshold": args.quiet_threshold,
        "statistic": "best of repeats (medians are in the *_median fields)",
        "command": "python3 bench/bench_cpu.py " + " ".join(sys.argv[1:]),
        "commit": commit,
        "tokenmill_binary": tokenmill_info,
        "versions": versions(),
        "machine": {
            "cpu": cpu_model(),
            "cpu_flags": cpu_flags(),
            "logical_cpus": os.cpu_count(),
            "bandwidth_gb_s": bw["bytes_per_second"] / 1e9,
            "bandwidth_method": bw["method"],
            "bandwidth_background_cores": bw["background_cores"],
            "bandwidth_gb_s_samples": [b["bytes_per_second"] / 1e9 for b in bandwidth_samples],
        },
        "prompt_tokens": PROMPT_TOKENS,
        "new_tokens": NEW_TOKENS,
        "results": results,
        "runtime_s": time.time() - started,
    }
    md = render_markdown(report)
    report["markdown"] = md
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(md)
    log(f"wrote {out} ({report['runtime_s']:.0f} s in all)")
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
