#!/usr/bin/env python3
"""A plain PyTorch training loop, as the peer of `tokenmill bench --phases train --compare`.

It trains the Hugging Face model in MODEL_DIR (config.json + safetensors, loaded with
transformers, f32) the way the bench's train phase does (src/measure/train_step_bench.h):
every step zeroes the gradients, runs forward + backward over --batch sequences of
--seq-len seeded random in-vocabulary ids with the inputs shifted by one as targets (a loss
over every position, mean cross-entropy), and takes one AdamW step. Dropout is switched off
(tokenmill has none); attention is transformers' default (SDPA); AdamW is torch's default
implementation with the bench's settings (lr 1e-4, betas 0.9/0.95, eps 1e-8, weight decay
0.1 on the 2-D tensors; tokenmill also spares the embeddings, which costs the same). One
untimed warm-up step, then --steps timed ones.

Prints the JSON `tokenmill bench --compare` reads:
  {"phases": [{"phase": "train", "batch": B, "tokens_per_s": X}], ...}
plus the step times, the losses and the versions.

Usage: python3 bench/torch_train_peer.py MODEL_DIR [--batch 1] [--seq-len 512] [--threads 2]
                                         [--steps 2] [--seed 1234]
Needs: pip install torch transformers safetensors
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    no_dropout = {k: 0.0 for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "attention_dropout")}
    config = transformers.AutoConfig.from_pretrained(args.model_dir)
    overrides = {k: v for k, v in no_dropout.items() if hasattr(config, k)}
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32, **overrides)
    model.train()

    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                   {"params": others, "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    vocab = config.vocab_size
    tokens = torch.randint(0, vocab, (args.batch, args.seq_len + 1), dtype=torch.long)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        return float(loss)

    losses = [step()]  # warm-up, untimed
    times = []
    for _ in range(args.steps):
        began = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - began)

    tokens_per_step = args.batch * args.seq_len
    print(json.dumps({
        "phases": [{"phase": "train", "batch": args.batch,
                    "tokens_per_s": tokens_per_step * len(times) / sum(times)}],
        "step_seconds": times,
        "losses": losses,
        "threads": torch.get_num_threads(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
