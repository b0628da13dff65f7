#!/usr/bin/env python3
"""The transformers side of gpu_model_bench: the same Llama-3-8B-shaped model (bf16, random
weights, SDPA attention) and the same phases, same output format ({"name", "ms",
"tokens_per_s"} per line).

  prefill 512       one forward over a 512-token prompt
  decode batch 1    128 greedy tokens after that prompt (generate; its prefill time subtracted)
  decode batch B    32 greedy tokens for B sequences of 32-token prompts (B = 16, 64, 256)

usage: transformers_peer.py [LAYERS]   (32 by default, as gpu_model_bench)
"""
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

PROMPT, DECODE, BATCH_PROMPT, BATCH_DECODE = 512, 128, 32, 32


def report(name, seconds, tokens):
    print(json.dumps({"name": name, "ms": seconds * 1e3, "tokens_per_s": tokens / seconds}), flush=True)


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def generate_seconds(model, ids, new_tokens):
    return timed(lambda: model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                        do_sample=False, pad_token_id=0))


def main():
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                         attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    prompt = (torch.arange(PROMPT, device="cuda") * 7919 % 128000).unsqueeze(0)
    with torch.inference_mode():
        generate_seconds(model, prompt[:, :64], 2)  # warm-up
        report("prefill 512", timed(lambda: model(prompt)), PROMPT)
        prefill = generate_seconds(model, prompt, 1)
        report("decode batch 1", generate_seconds(model, prompt, DECODE + 1) - prefill, DECODE)
        for batch in (16, 64, 256):
            ids = (torch.arange(batch * BATCH_PROMPT, device="cuda") * 17 % 128000).reshape(batch, BATCH_PROMPT)
            prefill = generate_seconds(model, ids, 1)
            total = generate_seconds(model, ids, BATCH_DECODE + 1)
            report(f"decode batch {batch}", total - prefill, batch * BATCH_DECODE)


if __name__ == "__main__":
    main()
