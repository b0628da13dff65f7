#!/usr/bin/env python3
"""Check that transformers loads what `tokenmill export` writes, and computes what tokenmill
computes from it (run by hand; the C++ tests do not need torch).

Usage:  python3 scripts/check_transformers_export.py --tokenmill BUILD/tokenmill
Needs torch and transformers (python3 -m pip install torch transformers). Exit status 0
when every check passes; prints one line per check.

What it does, in a temporary directory:
  1. `tokenmill prepare` a slice of data/tinyshakespeare.txt with the tokenizer of the
     tests/fixtures/hf/smollm_chat model (a SmolLM2-shaped Llama with a real tokenizer).
  2. Three `tokenmill train` runs, each exported with `tokenmill export` as f32, bf16, f16:
       identity:  fine-tune smollm_chat for 1 step at lr 1e-30 (no weight moves in float32),
                  so the f32 export must hold the fixture's tensors bit for bit and
                  transformers must reproduce the fixture's expected.json logits (which
                  transformers computed from the original files) to 1e-5;
       finetune:  fine-tune smollm_chat for 5 steps at lr 1e-3 (weights move);
       scratch:   a 2-layer Llama from scratch (tokenmill's own config.json), 20 steps (it
                  learns little more than token frequencies: its greedy continuation is one
                  repeated token, so its log-probabilities carry that check).
  3. For every export: AutoModelForCausalLM.from_pretrained (bf16/f16 exports loaded with
     dtype=float32, tokenmill's CPU policy: f32 math over the stored values) and
     AutoTokenizer.from_pretrained load it; the tokenizer encodes a text prompt to the ids
     `tokenmill generate --json` encodes it to; a 24-token greedy continuation of three
     prompts by transformers equals `tokenmill generate --temperature 0 --ignore-eos`'s,
     up to the first step where transformers' top-1/top-2 logit gap is below 1e-3 (a near
     tie, where float32 summation order may pick either; the token taken must then be one
     of those two); `tokenmill serve`'s log-probabilities of that continuation (the
     chosen token's and the top 5 at every step, /v1/completions with logprobs 5) equal
     transformers' log_softmax of its logits, teacher-forced on the same tokens, to 1e-4;
     bf16/f16 exports give logits within rounding of the f32 export's.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np
import safetensors.numpy
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SMOLLM = os.path.join(ROOT, "tests", "fixtures", "hf", "smollm_chat")
TEXT_PROMPT = "ROMEO: But soft, what light"
ID_PROMPTS = [[44], [203, 42, 150, 81, 108, 24, 242], [6, 39, 237, 120, 49, 154, 124, 140]]
NEW_TOKENS = 24
NEAR_TIE = 1e-3
TOP_LOGPROBS = 5
LOGPROB_TOLERANCE = 1e-4  # float32 forward passes in two engines: ~1e-6 expected
# bf16 / f16 round every weight once: logits move by up to ~0.1 / ~0.01 on these models.
DTYPE_TOLERANCE = {"bf16": 0.25, "f16": 0.03}

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def tokenmill(binary, *args):
    r = subprocess.run([binary, "-t", "1", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tokenmill {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def greedy(model, ids):
    """NEW_TOKENS greedy tokens (no cache: a full forward per step) and each step's top-2 gap."""
    out, gaps = list(ids), []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(input_ids=torch.tensor([out]), use_cache=False).logits[0, -1]
            top = torch.topk(logits, 2)
            gaps.append((top.values[0] - top.values[1]).item())
            out.append(int(top.indices[0]))
    return out[len(ids):], gaps


def our_greedy(binary, export, ids):
    return json.loads(tokenmill(binary, "generate", "-m", export, "--prompt-ids", ",".join(map(str, ids)),
                                "-n", str(NEW_TOKENS), "--temperature", "0", "--ignore-eos", "--json"))["ids"]


def compare_greedy(model, ours, ids, label):
    theirs, gaps = greedy(model, ids)
    agree = 0
    while agree < NEW_TOKENS and ours[agree] == theirs[agree]:
        agree += 1
    if agree == NEW_TOKENS:
        check(True, f"{label}: greedy {NEW_TOKENS} tokens identical (min top-2 gap {min(gaps):.4f})")
        return
    # A divergence passes only at a near tie, where ours is transformers' second choice.
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids + theirs[:agree]]), use_cache=False).logits[0, -1]
    second = int(torch.topk(logits, 2).indices[1])
    check(gaps[agree] < NEAR_TIE and ours[agree] == second,
          f"{label}: greedy agrees for {agree} tokens, then a top-2 gap of {gaps[agree]:.2e}")


class Server:
    """`tokenmill serve -m export --port 0` for the duration of a with-block."""

    def __init__(self, binary, export):
        self.proc = subprocess.Popen([binary, "-t", "1", "serve", "-m", export, "--port", "0",
                                      "--kv-cache-memory", str(16 << 20)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            found = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
            if found:
                self.url = found.group(1)
                return
        sys.exit(f"tokenmill serve -m {export} exited before listening ({self.proc.wait()})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()

    def complete(self, ids):
        body = {"prompt": ids, "max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True,
                "logprobs": TOP_LOGPROBS}
        request = urllib.request.Request(self.url + "/v1/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            return json.load(response)["choices"][0]["logprobs"]


def compare_logprobs(model, server, ours, ids, label):
    """The served log-probabilities of tokenmill's greedy continuation `ours` against transformers'."""
    served = server.complete(ids)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids + ours]), use_cache=False).logits[0]
    logprobs = torch.log_softmax(logits[len(ids) - 1:-1].double(), dim=-1)
    chosen = logprobs[torch.arange(len(ours)), torch.tensor(ours)].numpy()
    top = torch.topk(logprobs, TOP_LOGPROBS, dim=-1).values.numpy()
    # top_logprobs maps token text to log-probability: tokens that decode to the same text
    # (byte pieces of invalid UTF-8) share one key, so a step may list fewer than 5; each
    # listed value must be one of transformers' top 5.
    ok = len(served["token_logprobs"]) == len(ours) == len(served["top_logprobs"])
    diff = float(np.abs(np.array(served["token_logprobs"]) - chosen).max()) if ok else float("inf")
    for step, listed in enumerate(served["top_logprobs"] if ok else []):
        ok = ok and len(listed) >= 1
        for value in listed.values():
            diff = max(diff, float(np.abs(top[step] - value).min()))
    check(ok and diff < LOGPROB_TOLERANCE,
          f"{label}: served log-probabilities (chosen + top {TOP_LOGPROBS}, {len(ours)} steps) within "
          f"{diff:.2e} of transformers'")


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy()


def check_export(binary, run, out_root, name):
    reference = None
    for dtype in ("f32", "bf16", "f16"):
        export = os.path.join(out_root, f"{name}_{dtype}")
        tokenmill(binary, "export", "--run", run, "--out", export, "--dtype", dtype)
        label = f"{name} {dtype}"
        model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32, attn_implementation="eager").eval()
        tokenizer = AutoTokenizer.from_pretrained(export)
        ours = json.loads(tokenmill(binary, "generate", "-m", export, "-p", TEXT_PROMPT, "-n", "1",
                                    "--temperature", "0", "--json"))["prompt_ids"]
        theirs = tokenizer(TEXT_PROMPT)["input_ids"]
        check(ours == theirs, f"{label}: AutoTokenizer encodes the prompt as tokenmill does ({len(ours)} ids)")
        with Server(binary, export) as server:
            for ids in ID_PROMPTS:
                ours = our_greedy(binary, export, ids)
                compare_greedy(model, ours, ids, f"{label} prompt of {len(ids)}")
                compare_logprobs(model, server, ours, ids, f"{label} prompt of {len(ids)}")
        logits = [logits_of(model, ids) for ids in ID_PROMPTS]
        if reference is None:
            reference = logits
        else:
            diff = max(float(np.abs(a - b).max()) for a, b in zip(logits, reference))
            check(diff < DTYPE_TOLERANCE[dtype], f"{label}: logits within {diff:.4f} of the f32 export's")
        if name == "identity" and dtype == "f32":
            expected = json.load(open(os.path.join(SMOLLM, "expected.json")))
            diff = max(float(np.abs(logits_of(model, p) - np.array(l)).max())
                       for p, l in zip(expected["prompts"], expected["logits"]))
            check(diff < 1e-5, f"{label}: transformers reproduces the fixture's expected.json logits "
                               f"(max diff {diff:.2e})")
            original = safetensors.numpy.load_file(os.path.join(SMOLLM, "model.safetensors"))
            exported = safetensors.numpy.load_file(os.path.join(export, "model.safetensors"))
            check(original.keys() == exported.keys() and all(np.array_equal(original[k], exported[k]) for k in original),
                  f"{label}: model.safetensors holds the fixture's {len(original)} tensors bit for bit")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenmill", required=True, help="the tokenmill executable")
    args = ap.parse_args()
    binary = os.path.abspath(args.tokenmill)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(os.path.join(ROOT, "data", "tinyshakespeare.txt")) as f:
            text = f.read(40000)
        with open(corpus, "w") as f:
            f.write(text)
        data = os.path.join(tmp, "data")
        tokenmill(binary, "prepare", "-m", SMOLLM, "--input", corpus, "--out", data)
        common = ["--data", data, "--batch", "2", "--seq-len", "32", "--eval-every", "0", "--sample-tokens", "4"]
        runs = {
            "identity": ["--from", SMOLLM, "--steps", "1", "--lr", "1e-30"],
            "finetune": ["--from", SMOLLM, "--steps", "5", "--lr", "1e-3"],
            "scratch": ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--context", "64", "--steps", "20",
                        "--lr", "3e-3"],
        }
        for name, flags in runs.items():
            run = os.path.join(tmp, "run_" + name)
            tokenmill(binary, "train", "--out", run, *common, *flags)
            check_export(binary, run, tmp, name)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
