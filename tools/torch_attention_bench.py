#!/usr/bin/env python3
"""Times PyTorch's attention on the CPU at the shapes `s6_flash --bench` times, for speed ratios.

Two measures, printed one line each in the crate's format, so the two outputs can be read side by side:

* `--lengths`: causal attention of one sequence, 12 heads of width 64, by
  `F.scaled_dot_product_attention(q, k, v, is_causal=True)` (PyTorch's CPU flash kernel), forward and
  forward + backward, at each T:
      T=4096 path=torch_sdpa threads=1 forward_ms=… backward_ms=…
  backward_ms is the time of `out.backward(grad)` alone, after a timed forward.
* `--modules`: chapter 3's multi-head attention modules at batch 8, context 1,024, width 768, 12 heads
  (the shapes of rasbt's `ch03/02_bonus_efficient-multihead-attention` comparison), forward only:
  the chapter's `MultiHeadAttentionWrapper` of `CausalAttention` heads, its `MultiHeadAttention`
  (split heads, one masked softmax), the same with one combined Q/K/V projection, and the combined
  projection with `scaled_dot_product_attention`:
      module=multihead threads=1 forward_ms=…
The modules are written here from the chapter's description (dropout 0, no bias), with weights from
`torch.manual_seed(123)`; only the time is measured.

Each figure is the median of --repeat runs after --warmup untimed ones. Set up once (about 5 GB):
  python3 -m venv ~/torch && ~/torch/bin/pip install torch numpy
then, for example:
  ~/torch/bin/python tools/torch_attention_bench.py --lengths 256 1024 4096 --threads 1
  ~/torch/bin/python tools/torch_attention_bench.py --modules --threads 2
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HEADS, HEAD_WIDTH = 12, 64


def median_ms(fn, warmup, repeat):
    """The median wall time of `fn()` in milliseconds, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def time_lengths(lengths, threads, warmup, repeat):
    torch.manual_seed(123)
    for t in lengths:
        q, k, v = (torch.randn(1, HEADS, t, HEAD_WIDTH, requires_grad=True) for _ in range(3))
        grad = torch.randn(1, HEADS, t, HEAD_WIDTH)

        def forward():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        forward_ms = median_ms(forward, warmup, repeat)

        backward_times = []
        for i in range(warmup + repeat):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            start = time.perf_counter()
            out.backward(grad)
            if i >= warmup:
                backward_times.append((time.perf_counter() - start) * 1e3)
            q.grad = k.grad = v.grad = None
        backward_ms = statistics.median(backward_times)
        print(f"T={t} path=torch_sdpa threads={threads} forward_ms={forward_ms:.3f} "
              f"backward_ms={backward_ms:.3f}", flush=True)


def causal_mask(t):
    """True above the diagonal: the future a query must not see."""
    return torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)


class CausalAttention(nn.Module):
    """One head: queries, keys and values, scores scaled by √d, the future masked with −∞."""

    def __init__(self, d_in, d_out, context):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.register_buffer("mask", causal_mask(context))

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = (q @ k.transpose(1, 2)).masked_fill(self.mask[:t, :t], -torch.inf)
        return torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1) @ v


class Wrapper(nn.Module):
    """The chapter's `MultiHeadAttentionWrapper`: one `CausalAttention` per head, concatenated."""

    def __init__(self, d_in, d_out, context, heads):
        super().__init__()
        self.heads = nn.ModuleList(CausalAttention(d_in, d_out // heads, context) for _ in range(heads))
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        return self.out_proj(torch.cat([head(x) for head in self.heads], dim=-1))


class MultiHead(nn.Module):
    """The chapter's `MultiHeadAttention`: one projection each for Q, K, V, split into heads."""

    def __init__(self, d_in, d_out, context, heads):
        super().__init__()
        self.heads, self.d = heads, d_out // heads
        self.make_projections(d_in, d_out)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", causal_mask(context))

    def make_projections(self, d_in, d_out):
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)

    def project(self, x):
        return self.W_query(x), self.W_key(x), self.W_value(x)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.d).transpose(1, 2)  # (B, H, T, D)

    def attend(self, q, k, v):
        t = q.shape[2]
        scores = (q @ k.transpose(2, 3)).masked_fill(self.mask[:t, :t], -torch.inf)
        return torch.softmax(scores / self.d ** 0.5, dim=-1) @ v

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (self.split(y) for y in self.project(x))
        out = self.attend(q, k, v).transpose(1, 2).reshape(b, t, c)  # (B, T, C)
        return self.out_proj(out)


class CombinedQKV(MultiHead):
    """`MultiHead` with the three projections in one (d_in, 3·d_out) product."""

    def make_projections(self, d_in, d_out):
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=False)

    def project(self, x):
        return self.qkv(x).chunk(3, dim=-1)


class CombinedSdpa(CombinedQKV):
    """`CombinedQKV` with `scaled_dot_product_attention(..., is_causal=True)` for the attention."""

    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def time_modules(threads, warmup, repeat, batch=8, context=1024, width=768):
    torch.manual_seed(123)
    x = torch.randn(batch, context, width)
    for name, kind in [("wrapper", Wrapper), ("multihead", MultiHead),
                       ("combined_qkv", CombinedQKV), ("combined_qkv_sdpa", CombinedSdpa)]:
        module = kind(width, width, context, HEADS).eval()

        def forward():
            with torch.no_grad():
                module(x)

        print(f"module={name} threads={threads} forward_ms={median_ms(forward, warmup, repeat):.3f}",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="*", default=[],
                        help="the context lengths T to time SDPA at (e.g. 256 1024 4096 16384)")
    parser.add_argument("--modules", action="store_true",
                        help="time chapter 3's modules at batch 8, context 1,024, width 768")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs, of which the median (default 5)")
    args = parser.parse_args()
    if not args.lengths and not args.modules:
        parser.error("nothing to time: give --lengths T … or --modules")
    if any(t < 1 for t in args.lengths):
        parser.error("every length must be at least 1")
    if args.threads < 1 or args.repeat < 1 or args.warmup < 0:
        parser.error("--threads and --repeat must be at least 1, --warmup at least 0")
    torch.set_num_threads(args.threads)
    if args.lengths:
        time_lengths(args.lengths, args.threads, args.warmup, args.repeat)
    if args.modules:
        time_modules(args.threads, args.warmup, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
