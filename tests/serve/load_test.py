"""Load test of `tokenmill serve`: many concurrent streaming clients, every token checked.

    python3 tests/serve/load_test.py --binary build/tokenmill            # 256 clients
    python3 tests/serve/load_test.py --binary build/tokenmill --soak 600 # + 10 minutes of load

It starts the server on a small model (default tests/fixtures/gguf/llama_q4_1.gguf, on which a
greedy request gives the same tokens alone or in any batch) and builds --clients requests with
fixed-seed random prompts (token ids, half of them starting with a shared prefix so that the
prefix cache is used) and random output lengths (ignore_eos, temperature 0). Then:

  1. reference: each request alone, not streamed, one after another: its expected text;
  2. wave 1: all of them at once, streamed (POST /v1/completions, stream_options.include_usage):
     each stream must carry exactly its expected text (nothing lost, duplicated or taken from
     another stream), finish_reason "length", usage.completion_tokens the asked length, one
     response id, and end in "data: [DONE]";
  3. wave 2: the same, with --cancel-fraction of the streams closed by the client after a few
     chunks: what they got is a prefix of their text, and every other stream is still exact;
  4. after each wave /metrics must come back to 0 running, 0 waiting and 0 KV usage.
  5. --soak SECONDS: waves like 2 for that long (all checked the same way) while the server's
     RSS (VmRSS) is sampled every 10 s; memory is called flat when the median of the last
     quarter of the samples exceeds that of the first quarter by at most max(1 %, 4 MiB).

Only the standard library (sse_client.py: asyncio streams speaking HTTP/1.1). Prints a summary; exit status
0 when every check passed.
"""

import argparse
import asyncio
import json
import pathlib
import random
import shlex
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_process import serve  # noqa: E402
from sse_client import Post, post_json  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
MiB = 1 << 20


class StreamResult:
    def __init__(self):
        self.status = None
        self.text = ""
        self.chunks = 0  # content chunks (text or finish)
        self.ids = set()
        self.indices = set()
        self.finish_reason = None
        self.usage = None
        self.done = False  # "data: [DONE]" seen
        self.cancelled = False
        self.error = None


async def stream(host, port, payload, cancel_after_chunks=None):
    """A streamed completion, parsed event by event; with cancel_after_chunks the connection is
    closed once that many content chunks have arrived."""
    result = StreamResult()
    async with Post(host, port, "/v1/completions", payload) as response:
        result.status = response.status
        async for event in response.events():
            if event == "[DONE]":
                result.done = True
            elif result.status != 200:
                result.error = event
            else:
                result.ids.add(event["id"])
                result.usage = event.get("usage") or result.usage
                for choice in event["choices"]:
                    result.indices.add(choice["index"])
                    result.text += choice["text"]
                    result.chunks += 1
                    result.finish_reason = choice["finish_reason"] or result.finish_reason
                if cancel_after_chunks is not None and result.chunks >= cancel_after_chunks:
                    result.cancelled = True
                    break
    return result


class Load:
    def __init__(self, args, server):
        self.args = args
        self.server = server
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.requests = []  # (payload, expected text)
        self.failures = []

    def build(self, context, vocab):
        rng = random.Random(self.args.seed)
        shared = [rng.randrange(vocab) for _ in range(self.args.shared_prefix)]
        for _ in range(self.args.clients):
            length = rng.randint(1, self.args.max_prompt)
            prompt = [rng.randrange(vocab) for _ in range(length)]
            if rng.random() < 0.5:
                prompt = (shared + prompt)[:self.args.max_prompt]
            max_tokens = rng.randint(1, min(self.args.max_output, context - len(prompt)))
            self.requests.append({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                  "ignore_eos": True})

    async def reference(self):
        self.expected = []
        for i, payload in enumerate(self.requests):
            status, body = await post_json(self.host, self.port, "/v1/completions", payload)
            if status != 200 or body["usage"]["completion_tokens"] != payload["max_tokens"]:
                raise SystemExit(f"reference request {i} failed: HTTP {status}: {json.dumps(body)[:300]}")
            self.expected.append(body["choices"][0]["text"])

    def check(self, i, result, where):
        """Failure messages for stream `i` (a cancelled one: its text a prefix of the expected)."""
        payload, expected = self.requests[i], self.expected[i]
        problems = []
        if result.status != 200:
            problems.append(f"HTTP {result.status}: {json.dumps(result.error)[:200]}")
        elif result.cancelled:
            if not expected.startswith(result.text):
                problems.append(f"cancelled stream's text {result.text!r} is not a prefix of {expected!r}")
        else:
            if result.text != expected:
                problems.append(f"text {result.text!r} != expected {expected!r}")
            if result.finish_reason != "length":
                problems.append(f"finish_reason {result.finish_reason!r}")
            if not result.usage or result.usage["completion_tokens"] != payload["max_tokens"]:
                problems.append(f"usage {result.usage} (asked {payload['max_tokens']} tokens)")
            if not result.done:
                problems.append("no data: [DONE]")
        if len(result.ids) > 1 or result.indices - {0}:
            problems.append(f"ids {sorted(result.ids)}, choice indices {sorted(result.indices)}")
        return [f"{where}: request {i}: {p}" for p in problems]

    async def wave(self, name, indices, cancel_fraction, rng):
        """Streams `indices` at once; returns (streams, exact, cancelled, output tokens, seconds)."""
        plan = []
        for i in indices:
            cancel = None
            if self.requests[i]["max_tokens"] >= 4 and rng.random() < cancel_fraction:
                cancel = rng.randint(1, 3)
            plan.append((i, cancel))
        payloads = [dict(self.requests[i], stream=True, stream_options={"include_usage": True}) for i, _ in plan]
        start = time.monotonic()
        results = await asyncio.gather(*[stream(self.host, self.port, p, c) for p, (_, c) in zip(payloads, plan)],
                                       return_exceptions=True)
        seconds = time.monotonic() - start
        exact = cancelled = tokens = 0
        for (i, _), result in zip(plan, results):
            if isinstance(result, BaseException):
                self.failures.append(f"{name}: request {i}: {type(result).__name__}: {result}")
                continue
            problems = self.check(i, result, name)
            self.failures += problems
            cancelled += result.cancelled
            if not problems and not result.cancelled:
                exact += 1
                tokens += self.requests[i]["max_tokens"]
        return len(plan), exact, cancelled, tokens, seconds

    async def drained(self, name, timeout=15.0):
        """Waits for 0 running, 0 waiting, 0 KV usage; returns the seconds it took."""
        start = time.monotonic()
        keys = ("tokenmill_num_requests_running", "tokenmill_num_requests_waiting", "tokenmill_kv_cache_usage_ratio")
        while True:
            metrics = await asyncio.to_thread(self.server.metrics)
            values = [metrics.get(k) for k in keys]
            if values == [0, 0, 0]:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                self.failures.append(f"{name}: after {timeout} s /metrics still shows running, waiting, "
                                     f"KV usage = {values}")
                return None
            await asyncio.sleep(0.1)

    async def soak(self, seconds, rng):
        samples = []  # (seconds since start, RSS bytes)
        start = time.monotonic()
        stop = asyncio.Event()

        async def sample():
            while not stop.is_set():
                samples.append((time.monotonic() - start, self.server.rss_bytes()))
                try:
                    await asyncio.wait_for(stop.wait(), 10)
                except asyncio.TimeoutError:
                    pass

        sampler = asyncio.create_task(sample())
        requests = waves = 0
        while time.monotonic() - start < seconds:
            indices = rng.sample(range(len(self.requests)), len(self.requests))
            n, _, _, _, _ = await self.wave(f"soak wave {waves}", indices, self.args.cancel_fraction, rng)
            requests += n
            waves += 1
        stop.set()
        await sampler
        samples.append((time.monotonic() - start, self.server.rss_bytes()))
        return samples, requests, waves


def memory_verdict(samples):
    rss = [r for _, r in samples]
    quarter = max(1, len(rss) // 4)
    first, last = statistics.median(rss[:quarter]), statistics.median(rss[-quarter:])
    growth = last - first
    return growth <= max(0.01 * first, 4 * MiB), first, last, growth


def report_wave(name, stats, drain_seconds):
    streams, exact, cancelled, tokens, seconds = stats
    drained = "not drained" if drain_seconds is None else f"drained in {drain_seconds:.1f} s"
    print(f"{name}: {streams} streams, {exact}/{streams - cancelled} exact, {cancelled} cancelled, "
          f"{tokens} tokens in {seconds:.1f} s ({tokens / max(seconds, 1e-9):.0f} tok/s); {drained}")


async def run(args, server):
    load = Load(args, server)
    model = (await asyncio.to_thread(server.get_json, "/v1/models"))["data"][0]
    context = model["max_model_len"]
    load.build(context, args.vocab)
    t = time.monotonic()
    await load.reference()
    print(f"reference: {len(load.requests)} requests alone in {time.monotonic() - t:.1f} s "
          f"(prompts 1..{args.max_prompt} tokens, outputs 1..{args.max_output}, context {context})")
    rng = random.Random(args.seed + 1)
    everyone = list(range(len(load.requests)))
    report_wave("wave 1", await load.wave("wave 1", everyone, 0.0, rng), await load.drained("wave 1"))
    report_wave("wave 2", await load.wave("wave 2", everyone, args.cancel_fraction, rng),
                await load.drained("wave 2"))
    flat = True
    if args.soak > 0:
        samples, requests, waves = await load.soak(args.soak, rng)
        await load.drained("soak")
        flat, first, last, growth = memory_verdict(samples)
        print(f"soak: {waves} waves, {requests} requests in {args.soak} s; RSS every 10 s (MiB): "
              + " ".join(f"{r / MiB:.1f}" for _, r in samples))
        print(f"soak: RSS median of the first quarter {first / MiB:.1f} MiB, of the last {last / MiB:.1f} MiB: "
              f"growth {growth / MiB:+.1f} MiB -> {'flat' if flat else 'NOT flat'}")
    metrics = await asyncio.to_thread(server.metrics)
    print("metrics: " + ", ".join(f"{k.removeprefix('tokenmill_')} {metrics.get(k, 0):g}" for k in (
        "tokenmill_num_preemptions_total", "tokenmill_prefix_cache_hits_total", "tokenmill_prefix_cache_queries_total",
        'tokenmill_requests_finished_total{reason="cancelled"}', 'tokenmill_http_responses_total{code="5xx"}',
        'tokenmill_http_responses_total{code="4xx"}', "tokenmill_spec_draft_tokens_total",
        "tokenmill_spec_accepted_tokens_total")))
    return load.failures, flat


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="the tokenmill executable")
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "gguf" / "llama_q4_1.gguf"))
    parser.add_argument("--threads", type=int, default=2, help="tokenmill -t")
    parser.add_argument("--clients", type=int, default=256, help="concurrent streams per wave")
    parser.add_argument("--max-prompt", type=int, default=96, help="longest prompt, tokens")
    parser.add_argument("--max-output", type=int, default=64, help="longest output, tokens")
    parser.add_argument("--shared-prefix", type=int, default=32, help="tokens of the prefix half the prompts share")
    parser.add_argument("--vocab", type=int, default=512, help="prompt token ids are drawn below this")
    parser.add_argument("--cancel-fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--soak", type=float, default=0, help="seconds of sustained load after the waves")
    parser.add_argument("--server-args", default="", help="more `tokenmill serve` flags, one string")
    args = parser.parse_args()
    with serve(args.binary, args.model, *shlex.split(args.server_args), threads=args.threads) as server:
        failures, flat = asyncio.run(run(args, server))
    for failure in failures[:20]:
        print("FAIL " + failure)
    if len(failures) > 20:
        print(f"... and {len(failures) - 20} more failures")
    ok = not failures and flat
    print("load test: " + ("PASS" if ok else f"FAIL ({len(failures)} failed checks{'' if flat else ', memory grew'})"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
