#!/usr/bin/env python3
"""The PyTorch side of gpu_ops_bench: the same ops at the same shapes, same output format.

Each op is timed as gpu_ops_bench times it: a warm-up call, then 5 rounds of `reps` calls
between two synchronisations, median of the rounds. Matmuls take bf16 activations (PyTorch's
usual setting; ours convert f32 activations to bf16 inside the op, which is extra work on our
side); attention is F.scaled_dot_product_attention (causal, GQA) with bf16 q/k/v.
"""
import json
import time

import torch
import torch.nn.functional as F

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, HEAD_DIM = 4096, 14336, 32, 8, 128


def median_ms(op, reps):
    op()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            op()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) * 1e3 / reps)
    rounds.sort()
    return rounds[len(rounds) // 2]


def report(name, ms, flops, nbytes):
    print(json.dumps({"name": name, "ms": ms, "flops": flops, "bytes": nbytes,
                      "tflops": flops / (ms * 1e9), "gbps": nbytes / (ms * 1e6)}), flush=True)


def rand(*shape, dtype=torch.bfloat16):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)


def bench_copy():
    nbytes = 2 << 30
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    report("copy 2GiB", median_ms(lambda: b.copy_(a), 10), 0, 2 * nbytes)


def bench_matmul(n, k, m):
    x, w = rand(n, k), rand(m, k)
    ms = median_ms(lambda: torch.matmul(x, w.t()), 200 if n == 1 else 20)
    nbytes = x.numel() * 2 + w.numel() * 2 + n * m * 2
    report(f"matmul bf16 n={n} k={k} m={m}", ms, 2.0 * n * k * m, nbytes)


def bench_attention(n, past):
    context = past + n
    q = rand(1, HEADS, n, HEAD_DIM)
    k, v = rand(1, KV_HEADS, context, HEAD_DIM), rand(1, KV_HEADS, context, HEAD_DIM)
    if n == 1:  # one query attends to every cached key: no mask needed
        op = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    else:  # past == 0 here: plain causal
        op = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ms = median_ms(op, 200 if n == 1 else 10)
    pairs = sum(past + t + 1 for t in range(n))
    nbytes = (q.numel() + k.numel() + v.numel() + q.numel()) * 2
    report(f"attention bf16 n={n} past={past}", ms, 4.0 * HEAD_DIM * HEADS * pairs, nbytes)


def bench_attention_backward(n, heads, kv_heads, head_dim):
    """The backward alone of causal SDPA (bf16), from a forward kept for it; FLOPs as ours."""
    q = rand(1, heads, n, head_dim).requires_grad_()
    k, v = rand(1, kv_heads, n, head_dim).requires_grad_(), rand(1, kv_heads, n, head_dim).requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    dout = rand(1, heads, n, head_dim)
    ms = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), 5)
    pairs = n * (n + 1) / 2
    nbytes = 2 * (q.numel() + k.numel() + v.numel()) * 2 + 2 * q.numel() * 2
    report(f"attention backward n={n} heads={heads}/{kv_heads} hd={head_dim}", ms,
           10.0 * head_dim * heads * pairs, nbytes)


def bench_rms_norm(n):
    x, weight = rand(n, HIDDEN, dtype=torch.float32), rand(HIDDEN, dtype=torch.float32)
    ms = median_ms(lambda: F.rms_norm(x, (HIDDEN,), weight, 1e-5), 100)
    report(f"rms_norm n={n} d={HIDDEN}", ms, 0, 2.0 * x.numel() * 4)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    bench_copy()
    for n in (1, 16, 64, 256):
        bench_matmul(n, HIDDEN, INTERMEDIATE)
    for n in (512, 4096):
        bench_matmul(n, HIDDEN, INTERMEDIATE)
        bench_matmul(n, INTERMEDIATE, HIDDEN)
    bench_attention(512, 0)
    bench_attention(1, 4095)
    bench_attention_backward(1024, 12, 12, 64)
    bench_attention_backward(2048, HEADS, KV_HEADS, HEAD_DIM)
    bench_rms_norm(512)


if __name__ == "__main__":
    main()
