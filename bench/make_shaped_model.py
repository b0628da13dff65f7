#!/usr/bin/env python3
"""A random-weight Hugging Face model of a real model's shape, for benchmarks where the real
weights are out of reach (no model hub here): speed does not depend on the values.

Usage: python3 bench/make_shaped_model.py SHAPE OUT_DIR
Shapes:
  qwen3-0.6b: Qwen/Qwen3-0.6B's config.json (hidden 1024, 28 layers, 16 heads of 128, 8
    key/value heads, SwiGLU 3072, vocab 151936, tied embeddings, rope_theta 1e6).
  qwen3-30b-a3b-small: Qwen/Qwen3-30B-A3B's layer (hidden 2048, 32 heads of 128, 4 key/value
    heads, experts of width 768, 8 per token, renormalised) with 6 layers instead of 48, 64
    experts instead of 128 and a vocabulary of 65536 instead of 151936, so that it fits this
    machine (2.2 G parameters).
  gpt-oss-20b-small: openai/gpt-oss-20b's layer (hidden 2880, 64 heads of 64, 8 key/value heads,
    attention sinks, 128-position sliding windows on every other layer, YaRN, experts of width
    2880 with biases, 4 per token, their clamped SwiGLU) with 4 layers instead of 24, 16 experts
    instead of 32 and a vocabulary of 65536 instead of 201088 (1.8 G parameters); its experts
    in MXFP4 as the Hub's checkpoint keeps them (their weights rounded to MXFP4 first).
Weights are transformers' own initialisation (seed 0), saved in bf16 as the Hub checkpoints are.
Needs torch and transformers.
"""

import importlib.util
import os
import sys

import torch
from transformers import AutoModelForCausalLM, GptOssConfig, Qwen3Config, Qwen3MoeConfig

SHAPES = {
    "qwen3-0.6b": lambda: Qwen3Config(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=151643,
        eos_token_id=151645, use_sliding_window=False),
    "qwen3-30b-a3b-small": lambda: Qwen3MoeConfig(
        vocab_size=65536, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
        num_hidden_layers=6, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
        num_experts=64, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False, bos_token_id=151643 % 65536, eos_token_id=151645 % 65536,
        use_sliding_window=False),
    "gpt-oss-20b-small": lambda: GptOssConfig(
        vocab_size=65536, hidden_size=2880, intermediate_size=2880, num_hidden_layers=4,
        num_attention_heads=64, num_key_value_heads=8, head_dim=64, num_local_experts=16,
        num_experts_per_tok=4, sliding_window=128, max_position_embeddings=131072, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=1),
}


def fixture_tools():
    """tests/fixtures/make_hf_fixtures.py, for its MXFP4 writer."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "make_hf_fixtures.py")
    spec = importlib.util.spec_from_file_location("make_hf_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SHAPES:
        sys.exit(__doc__)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(SHAPES[sys.argv[1]](), dtype=torch.bfloat16)
    mxfp4 = model.config.model_type == "gpt_oss"
    if mxfp4:
        fixture_tools().round_experts_to_mxfp4(model)
    model.save_pretrained(sys.argv[2], max_shard_size="100GB")
    if mxfp4:
        fixture_tools().write_mxfp4_experts(sys.argv[2])
    print(f"{sys.argv[2]}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()
