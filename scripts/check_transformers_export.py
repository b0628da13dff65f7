#!/usr/bin/env python3
"""Check that transformers loads what `tokenmill export` writes, and computes what tokenmill
computes from it. CTest runs it as train_transformers_export_check where torch,
transformers and peft are installed; CI installs none of them, so its last output is kept
in scripts/check_transformers_export.recorded.txt (rewrite that file when this changes).

Usage:  python3 scripts/check_transformers_export.py --tokenmill BUILD/tokenmill
Needs torch, transformers and peft (python3 -m pip install torch transformers peft). Exit
status 0 when every check passes; prints one line per check.

What it does, in a temporary directory:
  1. `tokenmill prepare` a slice of data/tinyshakespeare.txt with the tokenizer of the
     tests/fixtures/hf/smollm_chat model (a SmolLM2-shaped Llama with a real tokenizer).
     A second source model is made from it with transformers: the same weights saved in
     bf16, with a generation_config.json holding an eos list [2, 0], temperature and top_p
     (what fine-tuners start from: bf16 Hub checkpoints with sampling defaults).
  2. Five `tokenmill train` runs, each exported with `tokenmill export` as f32, bf16, f16:
       identity:  fine-tune smollm_chat for 1 step at lr 1e-30 (no weight moves in float32),
                  so the f32 export must hold the fixture's tensors bit for bit and
                  transformers must reproduce the fixture's expected.json logits (which
                  transformers computed from the original files) to 1e-5;
       finetune:  fine-tune smollm_chat for 5 steps at lr 1e-3 (weights move);
       bf16_source: fine-tune the bf16 source for 3 steps;
       lora:      LoRA (rank 4, alpha 8, every linear layer) on smollm_chat, 5 steps at lr
                  1e-2, exported merged (`--lora merged`) and as a PEFT adapter
                  (`--lora adapter`);
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
     transformers' log_softmax of its logits, teacher-forced on the same tokens, to 1e-4
     for f32 exports and 1e-2 for bf16/f16 ones (tokenmill keeps a 16-bit model's KV cache
     in f16, as llama.cpp does by default; transformers' is f32 here: ~2e-3..6e-3 seen);
     bf16/f16 exports give logits within rounding of the f32 export's.
  4. Metadata, for every export: `dtype="auto"` loads it in the exported dtype and the
     config's "dtype" and "torch_dtype" agree; GenerationConfig.from_pretrained gives the
     source's eos ids, bos, temperature and top_p; the tokenizer carries the source's chat
     template, and `tokenmill prepare` of chat data (.jsonl "messages") accepts the export.
  5. The PEFT adapter: PeftModel.from_pretrained(smollm_chat, adapter) computes the merged
     export's logits (to 1e-5) and its adapter_config.json names the trained modules.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np
import safetensors.numpy
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SMOLLM = os.path.join(ROOT, "tests", "fixtures", "hf", "smollm_chat")
TEXT_PROMPT = "ROMEO: But soft, what light"
ID_PROMPTS = [[44], [203, 42, 150, 81, 108, 24, 242], [6, 39, 237, 120, 49, 154, 124, 140]]
NEW_TOKENS = 24
NEAR_TIE = 1e-3
TOP_LOGPROBS = 5
# f32: float32 forward passes in two engines, ~1e-6 expected. bf16/f16: tokenmill keeps a
# 16-bit model's KV cache in f16 (transformers' stays f32 here), ~2e-3..6e-3 seen.
LOGPROB_TOLERANCE = {"f32": 1e-4, "bf16": 1e-2, "f16": 1e-2}
TORCH_DTYPE = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
CONFIG_DTYPE = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
GENERATION_FIELDS = ("bos_token_id", "eos_token_id", "temperature", "top_p", "top_k", "do_sample")
LORA_TARGETS = "q,k,v,o,gate,up,down"
LORA_MODULES = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
CHAT = {"messages": [{"role": "user", "content": "Who is Romeo?"},
                     {"role": "assistant", "content": "A Montague, and he loves Juliet."}]}
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


def compare_logprobs(model, server, ours, ids, label, tolerance):
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
    check(ok and diff < tolerance,
          f"{label}: served log-probabilities (chosen + top {TOP_LOGPROBS}, {len(ours)} steps) within "
          f"{diff:.2e} of transformers'")


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy()


def check_metadata(binary, export, dtype, source, chat_data, label):
    """What transformers and `tokenmill prepare` read besides the weights (see the docstring, 4)."""
    config = json.load(open(os.path.join(export, "config.json")))
    check(config.get("dtype") == config.get("torch_dtype") == CONFIG_DTYPE[dtype],
          f"{label}: config.json's dtype and torch_dtype are both {CONFIG_DTYPE[dtype]} "
          f"({config.get('dtype')}, {config.get('torch_dtype')})")
    loaded = AutoModelForCausalLM.from_pretrained(export, dtype="auto").dtype
    check(loaded == TORCH_DTYPE[dtype], f"{label}: dtype=\"auto\" loads it as {loaded}")
    if source is not None:
        theirs, ours = GenerationConfig.from_pretrained(source), GenerationConfig.from_pretrained(export)
        differ = [f for f in GENERATION_FIELDS if getattr(ours, f) != getattr(theirs, f)]
        check(not differ, f"{label}: generation config carries the source's "
                          f"{', '.join(f'{f}={getattr(theirs, f)}' for f in GENERATION_FIELDS)}"
                          + (f"; differs in {differ}" if differ else ""))
    template = AutoTokenizer.from_pretrained(export).chat_template
    check(template is not None and template == AutoTokenizer.from_pretrained(SMOLLM).chat_template,
          f"{label}: the tokenizer carries the source's chat template")
    prepared = subprocess.run([binary, "-t", "1", "prepare", "-m", export, "--input", chat_data, "--out",
                               export + "_chat_data", "--val-fraction", "0"], capture_output=True, text=True)
    check(prepared.returncode == 0, f"{label}: `tokenmill prepare` takes chat data with the export"
                                    + (f": {prepared.stderr.strip()}" if prepared.returncode else ""))


def check_export(binary, run, out_root, name, source, chat_data, export_flags=()):
    """Exports `run` in every dtype and checks each (see the docstring, 3 and 4); returns the
    f32 export's logits of ID_PROMPTS as transformers computes them."""
    reference = None
    for dtype in ("f32", "bf16", "f16"):
        export = os.path.join(out_root, f"{name}_{dtype}")
        tokenmill(binary, "export", "--run", run, "--out", export, "--dtype", dtype, *export_flags)
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
                compare_logprobs(model, server, ours, ids, f"{label} prompt of {len(ids)}", LOGPROB_TOLERANCE[dtype])
        logits = [logits_of(model, ids) for ids in ID_PROMPTS]
        if reference is None:
            reference = logits
        else:
            diff = max(float(np.abs(a - b).max()) for a, b in zip(logits, reference))
            check(diff < DTYPE_TOLERANCE[dtype], f"{label}: logits within {diff:.4f} of the f32 export's")
        check_metadata(binary, export, dtype, source, chat_data, label)
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
    return reference


def check_adapter(binary, run, out_root, merged_logits):
    """The PEFT adapter export against the merged one (see the docstring, 5)."""
    adapter = os.path.join(out_root, "lora_adapter")
    tokenmill(binary, "export", "--run", run, "--out", adapter, "--lora", "adapter")
    config = json.load(open(os.path.join(adapter, "adapter_config.json")))
    check(set(config["target_modules"]) == LORA_MODULES and config["r"] == 4 and config["lora_alpha"] == 8,
          f"lora adapter: adapter_config.json has r {config['r']}, alpha {config['lora_alpha']}, "
          f"targets {sorted(config['target_modules'])}")
    base = AutoModelForCausalLM.from_pretrained(SMOLLM, dtype=torch.float32, attn_implementation="eager").eval()
    base_logits = [logits_of(base, ids) for ids in ID_PROMPTS]
    model = PeftModel.from_pretrained(base, adapter).eval()
    diff = max(float(np.abs(logits_of(model, ids) - m).max()) for ids, m in zip(ID_PROMPTS, merged_logits))
    moved = max(float(np.abs(b - m).max()) for b, m in zip(base_logits, merged_logits))
    check(diff < 1e-5 and moved > 1e-2,
          f"lora adapter: PeftModel computes the merged export's logits to {diff:.2e} "
          f"(the adapter moves them by {moved:.3f})")


def make_bf16_source(out):
    """smollm_chat saved in bf16 by transformers, with sampling defaults and an eos list."""
    model = AutoModelForCausalLM.from_pretrained(SMOLLM, dtype=torch.bfloat16)
    model.generation_config.update(eos_token_id=[2, 0], do_sample=True, temperature=0.7, top_p=0.9)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(SMOLLM, name), out)
    return out


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
        chat_data = os.path.join(tmp, "chat.jsonl")
        with open(chat_data, "w") as f:
            f.write(json.dumps(CHAT) + "\n")
        bf16_source = make_bf16_source(os.path.join(tmp, "source_bf16"))
        common = ["--data", data, "--batch", "2", "--seq-len", "32", "--eval-every", "0", "--sample-tokens", "4"]
        runs = {  # name: (source model, train flags, export flags)
            "identity": (SMOLLM, ["--steps", "1", "--lr", "1e-30"], []),
            "finetune": (SMOLLM, ["--steps", "5", "--lr", "1e-3"], []),
            "bf16_source": (bf16_source, ["--steps", "3", "--lr", "1e-3"], []),
            "lora": (SMOLLM, ["--steps", "5", "--lr", "1e-2", "--lora-rank", "4", "--lora-alpha", "8",
                              "--lora-targets", LORA_TARGETS], ["--lora", "merged"]),
            "scratch": (None, ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--context", "64",
                               "--steps", "20", "--lr", "3e-3"], []),
        }
        for name, (source, flags, export_flags) in runs.items():
            run = os.path.join(tmp, "run_" + name)
            tokenmill(binary, "train", "--out", run, *common, *(["--from", source] if source else []), *flags)
            logits = check_export(binary, run, tmp, name, source, chat_data, export_flags)
            if name == "lora":
                check_adapter(binary, run, tmp, logits)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
