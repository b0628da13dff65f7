#!/usr/bin/env python3
"""A plain PyTorch training loop, as the peer of `tokenmill bench --phases train --compare`.

It trains a Hugging Face model the way the bench's train phase does
(src/measure/train_step_bench.h): every step zeroes the gradients, runs forward + backward
over --batch sequences of --seq-len seeded random in-vocabulary ids with the inputs shifted
by one as targets (a loss over every position, mean cross-entropy), and takes one AdamW step.
Dropout is switched off (tokenmill has none); attention is SDPA; AdamW is torch's default
implementation with the bench's settings (lr 1e-4, betas 0.9/0.95, eps 1e-8, weight decay
0.1 on the 2-D tensors; tokenmill also spares the embeddings, which costs the same). One
untimed warm-up step (two with --compile: the first compiles), then --steps timed ones.

The model: MODEL_DIR (config.json + safetensors, loaded with transformers), or --shape
gpt2-124m, transformers' GPT2Config defaults with seeded random weights (the shape of
`tokenmill bench --shape gpt2-124m`).

On the GPU (--device cuda) the weights, gradients and AdamW state stay FP32 and --autocast
bf16 / fp16 runs the forward and the loss under torch.autocast (fp16 with a GradScaler): the
peer of `tokenmill bench --device cuda --train-precision bf16`. The clock is read after
torch.cuda.synchronize(). --compile wraps the model in torch.compile (default mode).

Prints the JSON `tokenmill bench --compare` reads:
  {"phases": [{"phase": "train", "batch": B, "tokens_per_s": X}], ...}
plus the step times, the losses, the settings and the versions (on a GPU its name and the
peak memory allocated).

Usage: python3 bench/torch_train_peer.py (MODEL_DIR | --shape gpt2-124m) [--batch 1] [--seq-len 512]
           [--threads 2] [--steps 2] [--seed 1234] [--device cpu|cuda] [--autocast none|bf16|fp16]
           [--compile]
  e.g. python3 bench/torch_train_peer.py --shape gpt2-124m --device cuda --autocast bf16 \\
           --batch 8 --seq-len 1024 --steps 10 --compile
Needs: pip install torch transformers safetensors
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

NO_DROPOUT = ("resid_pdrop", "embd_pdrop", "attn_pdrop", "attention_dropout")


def make_model(args, torch, transformers):
    if args.shape is not None:
        config = transformers.GPT2Config()  # its defaults are GPT-2 124M
        for key in NO_DROPOUT:
            if hasattr(config, key):
                setattr(config, key, 0.0)
        return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa"), config
    config = transformers.AutoConfig.from_pretrained(args.model_dir)
    overrides = {k: 0.0 for k in NO_DROPOUT if hasattr(config, k)}
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32,
                                                              attn_implementation="sdpa", **overrides)
    return model, config


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", nargs="?")
    ap.add_argument("--shape", choices=["gpt2-124m"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--autocast", choices=["none", "bf16", "fp16"], default="none")
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    if (args.model_dir is None) == (args.shape is None):
        ap.error("give MODEL_DIR or --shape, not both")

    import torch
    import transformers

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model, config = make_model(args, torch, transformers)
    model.to(args.device).float().train()

    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                   {"params": others, "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    forward = torch.compile(model) if args.compile else model
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.autocast)
    scaler = torch.amp.GradScaler(args.device, enabled=args.autocast == "fp16")
    vocab = config.vocab_size
    tokens = torch.randint(0, vocab, (args.batch, args.seq_len + 1), dtype=torch.long).to(args.device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def sync() -> None:
        if args.device == "cuda":
            torch.cuda.synchronize()

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        autocast = torch.autocast(args.device, dtype=half) if half is not None else contextlib.nullcontext()
        with autocast:
            logits = forward(input_ids=inputs).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return float(loss.detach())

    losses = [step() for _ in range(2 if args.compile else 1)]  # warm-up, untimed
    times = []
    for _ in range(args.steps):
        sync()
        began = time.perf_counter()
        losses.append(step())  # float(loss) waits for the step's forward; sync() for the rest
        sync()
        times.append(time.perf_counter() - began)

    tokens_per_step = args.batch * args.seq_len
    report = {
        "phases": [{"phase": "train", "batch": args.batch,
                    "tokens_per_s": tokens_per_step * len(times) / sum(times)}],
        "step_seconds": times,
        "losses": losses,
        "device": args.device,
        "autocast": args.autocast,
        "compiled": args.compile,
        "seq_len": args.seq_len,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }
    if args.device == "cpu":
        report["threads"] = torch.get_num_threads()
    else:
        report["gpu"] = torch.cuda.get_device_name()
        report["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
