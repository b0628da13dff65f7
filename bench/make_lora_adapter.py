#!/usr/bin/env python3
"""A random PEFT LoRA adapter for a Llama-family model's shapes, for serving benchmarks.

    python3 bench/make_lora_adapter.py OUT_DIR [--rank 16] [--seed 0] [--targets q,k,v,o,gate,up,down]
        [--layers 30 --hidden 576 --heads 9 --kv-heads 3 --head-dim 64 --ff 1536]

The defaults are SmolLM2-135M's shapes (the model bench/serve_bench.py serves). Writes
OUT_DIR/adapter_config.json and OUT_DIR/adapter_model.safetensors as PEFT's save_pretrained
does (F32; A ~ N(0, 1/in), B ~ N(0, 0.02^2), lora_alpha = rank): what `tokenmill serve --lora
NAME=OUT_DIR` reads. The values are random: an adapter to time, not to use.
Needs numpy and safetensors (pip install numpy safetensors).
"""
import argparse
import json
import pathlib

import numpy as np
from safetensors.numpy import save_file

MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
           "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--targets", default="q,k,v,o,gate,up,down")
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--hidden", type=int, default=576)
    p.add_argument("--heads", type=int, default=9)
    p.add_argument("--kv-heads", type=int, default=3)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--ff", type=int, default=1536)
    a = p.parse_args()
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    shapes = {"q": (q, a.hidden), "k": (kv, a.hidden), "v": (kv, a.hidden), "o": (a.hidden, q),
              "gate": (a.ff, a.hidden), "up": (a.ff, a.hidden), "down": (a.hidden, a.ff)}
    targets = a.targets.split(",")
    rng = np.random.default_rng(a.seed)
    tensors = {}
    for layer in range(a.layers):
        for t in targets:
            out_f, in_f = shapes[t]
            name = f"base_model.model.model.layers.{layer}.{MODULES[t]}"
            tensors[name + ".lora_A.weight"] = (rng.standard_normal((a.rank, in_f)) / np.sqrt(in_f)).astype(np.float32)
            tensors[name + ".lora_B.weight"] = (0.02 * rng.standard_normal((out_f, a.rank))).astype(np.float32)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, out / "adapter_model.safetensors", metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": a.rank, "lora_alpha": a.rank,
              "target_modules": [MODULES[t].split(".")[1] for t in targets], "lora_dropout": 0.0, "bias": "none",
              "use_rslora": False, "use_dora": False, "rank_pattern": {}, "alpha_pattern": {}}
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"wrote {out}: rank {a.rank}, {len(targets)} targets x {a.layers} layers")


if __name__ == "__main__":
    main()
