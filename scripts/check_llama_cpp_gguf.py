#!/usr/bin/env python3
"""Check that llama.cpp loads what `tokenmill convert` writes and computes what transformers
computes from the original model: the GGUF side of the architectures' parity (run by hand,
and by CTest as convert_llama_cpp_check where llama-cpp-python is installed; CI installs it
not, so the last output is kept in scripts/check_llama_cpp_gguf.recorded.txt).

Usage:  python3 scripts/check_llama_cpp_gguf.py --tokenmill BUILD/tokenmill
Needs llama-cpp-python (pip install llama-cpp-python: it builds llama.cpp from source). Exit
status 0 when every check passes; prints one line per check.

For every tiny Hugging Face fixture in tests/fixtures/hf (every architecture tokenmill
converts), in a temporary directory: `tokenmill convert --type f32`, then llama.cpp
(llama_cpp.Llama, logits_all, CPU, one thread) evaluates the fixture's three prompts as token
ids with an f32 KV cache (and a LongRoPE fixture's long prompt, its last rows); its logits at
every position must equal expected.json's (what
transformers computed from the HF directory, float32) to 1e-4 of the largest logit (two
float32 engines with other summation orders agree to ~1e-6; a wrong tensor name, permutation
or norm shows as O(1)); GPT-2 and Gemma 2/3 (GELU MLPs) to 2e-3, as ggml's CPU GELU is an f16
table (the Gemmas' error is that size at the first token already, before any window
matters; Gemma 2's soft-capped logits, all below 5, make it larger relative to the largest);
gpt-oss with MXFP4 experts (kept MXFP4 by the conversion) to 3e-2, as llama.cpp (like
tokenmill) rounds their activations to Q8_0, where transformers multiplies in float32.

Such a fixture's greedy continuations are then llama.cpp's, not transformers': with --record,
llama.cpp's 32 greedy ids for each of its prompts (f32 KV cache, argmax of each step's logits)
are written to its llama_cpp_greedy.json, which tokenmill's parity test holds its own
quantized-activation run to.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np
from llama_cpp import Llama

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hf")
TOLERANCE = 1e-4
# GPT-2, Gemma 2/3: ggml's CPU GELU reads a table of f16 values (GGML_GELU_FP16), 5e-4 to
# 1.2e-3 relative here.
GELU_TABLE_TOLERANCE = 2e-3
GELU_MODEL_TYPES = ("gpt2", "gemma2", "gemma3_text", "gemma3")
# MXFP4 weights multiply Q8_0-rounded activations (1-2% relative here).
QUANTIZED_ACTIVATIONS_TOLERANCE = 3e-2

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def llama_cpp_logits(gguf, ids, context):
    # An f32 KV cache (llama.cpp's default is f16, which alone moves logits by ~1e-3).
    model = Llama(model_path=gguf, n_ctx=context, n_threads=1, logits_all=True, verbose=False,
                  type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    model.eval(ids)
    return np.array(model.scores[:len(ids)], dtype=np.float64)


def llama_cpp_greedy(gguf, prompt, context, new_tokens=32):
    model = Llama(model_path=gguf, n_ctx=context, n_threads=1, logits_all=True, verbose=False,
                  type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    model.eval(prompt)
    ids = []
    for _ in range(new_tokens):
        ids.append(int(np.argmax(model.scores[model.n_tokens - 1])))
        model.eval([ids[-1]])
    return ids


def record_greedy(directory, gguf, expected, context):
    path = os.path.join(directory, "llama_cpp_greedy.json")
    greedy = [{"prompt": p, "ids": llama_cpp_greedy(gguf, p, context)} for p in expected["prompts"]]
    with open(path, "w") as f:
        json.dump({"note": f"llama.cpp (llama-cpp-python {llama_cpp.__version__}) on `tokenmill convert --type f32` "
                           "of this directory (MXFP4 experts kept): 32 greedy ids per prompt, f32 KV cache",
                   "greedy": greedy}, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenmill", required=True, help="the tokenmill executable")
    ap.add_argument("--record", action="store_true", help="write llama_cpp_greedy.json of the MXFP4 fixtures")
    args = ap.parse_args()
    print(f"llama-cpp-python {llama_cpp.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(FIXTURES)):
            directory = os.path.join(FIXTURES, name)
            expected = json.load(open(os.path.join(directory, "expected.json")))
            gguf = os.path.join(tmp, name + ".gguf")
            converted = subprocess.run([args.tokenmill, "convert", directory, gguf, "--type", "f32"],
                                       capture_output=True, text=True)
            if converted.returncode != 0:
                check(False, f"{name}: tokenmill convert failed: {converted.stderr.strip()}")
                continue
            config = json.load(open(os.path.join(directory, "config.json")))
            # A multimodal checkpoint's text_config may leave it out (131072 by default): any
            # context holding the prompts does.
            whole_context = config.get("max_position_embeddings") or config.get("n_positions") or 512
            # LongRoPE: llama.cpp picks its factors by the context, transformers by the forward's
            # length: the prompts within the original context take the short ones in a context
            # of that size, the long prompt the long ones in the whole context.
            context = expected.get("context", whole_context)
            runs = list(zip(expected["prompts"], expected["logits"], [context] * len(expected["prompts"])))
            if "long_prompt" in expected:
                runs.append((expected["long_prompt"], expected["long_logits"], whole_context))
            worst = 0.0
            try:
                for ids, logits, run_context in runs:
                    theirs = np.array(logits, dtype=np.float64)
                    ours = llama_cpp_logits(gguf, ids, run_context)[-len(theirs):]
                    worst = max(worst, float(np.abs(ours - theirs).max() / np.abs(theirs).max()))
            except Exception as e:  # llama.cpp refusing the file is a failure of the file
                check(False, f"{name}: llama.cpp cannot run the converted file: {e}")
                continue
            tolerance = GELU_TABLE_TOLERANCE if config.get("model_type") in GELU_MODEL_TYPES else TOLERANCE
            if "mxfp4_note" in expected:
                tolerance = QUANTIZED_ACTIVATIONS_TOLERANCE
                if args.record:
                    record_greedy(directory, gguf, expected, context)
            check(worst < tolerance, f"{name}: llama.cpp's logits of the converted GGUF within {worst:.2e} "
                                     "(relative to the largest) of transformers' from the HF directory")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
