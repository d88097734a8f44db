#!/usr/bin/env python3
"""Writes the parity fixtures of `tests/s7_parity.rs`: inputs, weights, outputs and gradients that
PyTorch computes, for the crate to be checked against (as llm.c's `test_gpt2.c` reads a file PyTorch
wrote). The tests read the committed files; they need neither Python nor PyTorch.

Four files in `tests/fixtures/parity/`, each a safetensors file (an 8-byte little-endian header
length, a JSON header, then the raw little-endian numbers) whose header's `__metadata__` names the
command that wrote it, the PyTorch version, the seed and the sizes:

* `s6_flash.safetensors`: causal attention softmax(Q·Kᵀ/√D + causal mask)·V of Q, K, V (B, H, T, D)
  = (2, 3, 37, 12), its output, each row's log-sum-exp, and the gradients of Q, K and V for an
  upstream gradient `d_out`. T = 37 is no multiple of any of the crate's tile sizes, and 1/√12 is
  not exact in float32.
* `s7_gqa_window_rope.safetensors`: a grouped-query attention layer (width 24, 4 query heads of 6,
  2 key/value heads) with rotary positions, written as rasbt's `ch04/04_gqa` and
  `ch05/07_gpt_to_llama` write it (split halves, `repeat_interleave`), at (B, T) = (2, 29): its
  output and the gradients of x and of every weight and bias, under a sliding window of 7 keys (each
  token sees itself and the 6 before it) as `window/…`, and with no window as `full/…`.
* `s7_latent.safetensors` and `s7_latent_rope.safetensors`: multi-head latent attention (width 32,
  4 heads of 8, a latent of 12), without and with DeepSeek's decoupled RoPE (a rotary part R = 4 wide
  beside each query, and one rotary key shared by the heads), at (B, T) = (2, 23): output and
  gradients.

Every input and weight is drawn in float32 (`torch.randn`, `nn.Linear`'s own initialisation, biases
included). Each output is stored twice: `NAME.f32`, what PyTorch computes in float32, and
`NAME.f64`, the same modules run in float64 on the same float32 numbers, which stands for the exact
answer (its own rounding is some 1e-16 of it). The rotary tables are computed in float32, as
rasbt's `compute_rope_params` computes them, in both runs: they are part of the layer's definition.

The layers are written as a PyTorch user writes them, from the descriptions in the crate's docs
(the chapter `s7_variants`), not from its code. Set up once, from the crate's root:

    python3 -m venv /tmp/torch && /tmp/torch/bin/pip install torch numpy
    . /tmp/torch/bin/activate && python3 tools/parity_fixtures.py

The script checks its own float64 references two ways (`F.scaled_dot_product_attention` against
the formula written out; the GQA layer with H key/value heads and no rotation against
`F.multi_head_attention_forward`) before it writes anything.
"""
import copy
import json
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity"
DTYPES = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64"}


def command():
    """The command that ran this script, with the script's path from the crate's root."""
    script = Path(sys.argv[0]).resolve().relative_to(ROOT)
    return " ".join(["python3", str(script), *sys.argv[1:]])


def save(name, tensors, metadata):
    """Writes `tensors` (name -> float32 or float64 tensor) as a safetensors file, with `metadata`
    (name -> string) in its header."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for key in sorted(tensors):
        array = tensors[key].detach().cpu().contiguous().numpy()
        array = array.astype(array.dtype.newbyteorder("<"))
        data = array.tobytes()
        header[key] = {
            "dtype": DTYPES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    path = OUT / name
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes, {len(tensors)} tensors")


def metadata(what, seed, **sizes):
    return {
        "command": command(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "device": "cpu, 1 thread",
        "seed": f"torch.manual_seed({seed})",
        "what": what,
        **{k: str(v) for k, v in sizes.items()},
    }


def both(f32, f64, prefix=""):
    """Each output under `NAME.f32` and `NAME.f64`."""
    out = {f"{prefix}{k}.f32": v.float() for k, v in f32.items()}
    out.update({f"{prefix}{k}.f64": v.double() for k, v in f64.items()})
    return out


def causal_mask(t, window=None):
    """True where key j is hidden from query i: the future, and with a window of W keys every key
    older than the W newest (i − W + 1 ..= i are seen)."""
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    hidden = j > i
    if window is not None:
        hidden |= j <= i - window
    return hidden


def attention(q, k, v, window=None):
    """softmax(Q·Kᵀ/√D, masked)·V for (…, T, D), written out, and each row's log-sum-exp."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(causal_mask(q.shape[-2], window), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


# ----------------------------------------------------------------------------------------------
# a. Stage 6: causal attention, its output and gradients.
# ----------------------------------------------------------------------------------------------

def flash_fixture():
    seed, (b, h, t, d) = 4706, (2, 3, 37, 12)
    torch.manual_seed(seed)
    q, k, v, d_out = (torch.randn(b, h, t, d) for _ in range(4))
    results = {}
    for dtype in (torch.float32, torch.float64):
        leaves = [x.detach().to(dtype).clone().requires_grad_() for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves, is_causal=True)
        out.backward(d_out.to(dtype))
        with torch.no_grad():
            by_hand, lse = attention(*leaves)
        if dtype == torch.float64:
            gap = (out - by_hand).abs().max().item()
            assert gap < 1e-13, f"SDPA and the formula differ by {gap} in float64"
        grads = [x.grad for x in leaves]
        results[dtype] = dict(zip(["out", "lse", "grad.q", "grad.k", "grad.v"], [out, lse, *grads]))
    tensors = {"q": q, "k": k, "v": v, "d_out": d_out}
    tensors.update(both(results[torch.float32], results[torch.float64]))
    what = (
        "causal attention softmax(Q·Kᵀ/√D + causal mask)·V by F.scaled_dot_product_attention("
        "is_causal=True); lse = logsumexp of each row of masked scores (the f32 one by the formula "
        "written out); grad.* = gradients for the upstream gradient d_out"
    )
    save("s6_flash.safetensors", tensors, metadata(what, seed, B=b, H=h, T=t, D=d))


# ----------------------------------------------------------------------------------------------
# b. Stage 7: grouped-query attention with rotary positions and a sliding window.
# ----------------------------------------------------------------------------------------------

def rope_params(head_dim, t, theta_base=10_000.0):
    """rasbt's `compute_rope_params` (`ch05/07_gpt_to_llama`), float32: cos and sin (T, head_dim)."""
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    positions = torch.arange(t)
    angles = positions[:, None] * inv_freq[None, :]  # (T, head_dim / 2)
    angles = torch.cat([angles, angles], dim=1)  # (T, head_dim)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    """rasbt's `compute_rope`: split halves, (x1, x2) -> (x1·cos − x2·sin, x2·cos + x1·sin)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query attention: `num_heads` query heads share `num_kv_heads` key/value heads
    (query head h reads key/value head h // group), RoPE on queries and keys, and an optional
    window of W keys (each token sees itself and the W − 1 before it)."""

    def __init__(self, d_model, num_heads, num_kv_heads, rope=True):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.rope = rope
        self.W_query = nn.Linear(d_model, d_model)
        self.W_key = nn.Linear(d_model, num_kv_heads * self.head_dim)
        self.W_value = nn.Linear(d_model, num_kv_heads * self.head_dim)
        self.out_proj = nn.Linear(d_model, d_model)

    def heads(self, y, n):
        b, t, _ = y.shape
        return y.view(b, t, n, self.head_dim).transpose(1, 2)  # (B, n, T, D)

    def forward(self, x, window=None):
        b, t, d_model = x.shape
        q = self.heads(self.W_query(x), self.num_heads)  # (B, H, T, D)
        k = self.heads(self.W_key(x), self.num_kv_heads)  # (B, K, T, D)
        v = self.heads(self.W_value(x), self.num_kv_heads)  # (B, K, T, D)
        if self.rope:
            cos, sin = rope_params(self.head_dim, t)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = self.num_heads // self.num_kv_heads
        k = k.repeat_interleave(group, dim=1)  # (B, H, T, D)
        v = v.repeat_interleave(group, dim=1)  # (B, H, T, D)
        context, _ = attention(q, k, v, window)  # (B, H, T, D)
        return self.out_proj(context.transpose(1, 2).reshape(b, t, d_model))


def run_layer(layer, x, d_out, dtype, **kwargs):
    """The layer's output in `dtype` and the gradients of x and of each parameter, for d_out."""
    layer = layer.to(dtype)
    layer.zero_grad()
    x = x.detach().to(dtype).clone().requires_grad_()
    out = layer(x, **kwargs)
    out.backward(d_out.to(dtype))
    grads = {f"grad.{name}": p.grad for name, p in layer.named_parameters()}
    return {"out": out, "grad.x": x.grad, **grads}


def copies(layer):
    """The layer in float32 and an independent float64 copy of the same numbers."""
    return {torch.float32: layer, torch.float64: copy.deepcopy(layer)}


def check_gqa_reference():
    """With K = H and no rotation the layer is plain multi-head attention; check it in float64
    against `F.multi_head_attention_forward`."""
    torch.manual_seed(1)
    layer = GroupedQueryAttention(12, 3, 3, rope=False).double()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    want = F.multi_head_attention_forward(
        x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), 12, 3,
        None, torch.cat([layer.W_query.bias, layer.W_key.bias, layer.W_value.bias]),
        None, None, False, 0.0, layer.out_proj.weight, layer.out_proj.bias,
        need_weights=False, attn_mask=causal_mask(5), use_separate_proj_weight=True,
        q_proj_weight=layer.W_query.weight, k_proj_weight=layer.W_key.weight,
        v_proj_weight=layer.W_value.weight,
    )[0].transpose(0, 1)
    gap = (layer(x) - want).abs().max().item()
    assert gap < 1e-13, f"the GQA layer with K = H is {gap} from multi-head attention"


def gqa_fixture():
    seed, (b, t, c, heads, kv_heads, window) = 4707, (2, 29, 24, 4, 2, 7)
    torch.manual_seed(seed)
    layer = GroupedQueryAttention(c, heads, kv_heads)
    x, d_out = torch.randn(b, t, c), torch.randn(b, t, c)
    tensors = {"x": x, "d_out": d_out}
    tensors.update({name: p.detach().clone() for name, p in layer.named_parameters()})
    layers = copies(layer)
    for prefix, w in [("window/", window), ("full/", None)]:
        runs = {dt: run_layer(layers[dt], x, d_out, dt, window=w) for dt in layers}
        tensors.update(both(runs[torch.float32], runs[torch.float64], prefix))
    what = (
        "grouped-query attention, RoPE (split halves, theta 10000) on queries and keys, "
        "repeat_interleave of the key/value heads, causal mask, window/: each token sees itself and "
        "the W - 1 keys before it, full/: no window; nn.Linear layers W_query, W_key, W_value, "
        "out_proj with biases; grad.* for the upstream gradient d_out"
    )
    sizes = dict(B=b, T=t, C=c, H=heads, K=kv_heads, D=c // heads, W=window)
    save("s7_gqa_window_rope.safetensors", tensors, metadata(what, seed, **sizes))


# ----------------------------------------------------------------------------------------------
# c. Stage 7: multi-head latent attention, without and with decoupled RoPE.
# ----------------------------------------------------------------------------------------------

class LatentAttention(nn.Module):
    """Causal multi-head latent attention: keys and values unfolded from a latent c = W_DKV(x),
    L wide. With `rope`, DeepSeek-V2's decoupled RoPE: a rotary part R = D/2 wide beside each
    head's query (W_QR) and one rotary key beside every head's key (W_KR), the scores scaled by
    1/√(D + R)."""

    def __init__(self, d_model, num_heads, latent, rope):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.r = self.head_dim // 2
        self.W_query = nn.Linear(d_model, d_model)
        self.W_DKV = nn.Linear(d_model, latent)
        self.W_key = nn.Linear(latent, d_model)
        self.W_value = nn.Linear(latent, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.rope = rope
        if rope:
            self.W_QR = nn.Linear(d_model, num_heads * self.r)
            self.W_KR = nn.Linear(d_model, self.r)

    def heads(self, y, n, width):
        b, t, _ = y.shape
        return y.view(b, t, n, width).transpose(1, 2)  # (B, n, T, width)

    def forward(self, x):
        b, t, d_model = x.shape
        h, d = self.num_heads, self.head_dim
        c = self.W_DKV(x)  # (B, T, L)
        q = self.heads(self.W_query(x), h, d)  # (B, H, T, D)
        k = self.heads(self.W_key(c), h, d)  # (B, H, T, D)
        v = self.heads(self.W_value(c), h, d)  # (B, H, T, D)
        if self.rope:
            cos, sin = rope_params(self.r, t)
            q_r = apply_rope(self.heads(self.W_QR(x), h, self.r), cos, sin)  # (B, H, T, R)
            k_r = apply_rope(self.heads(self.W_KR(x), 1, self.r), cos, sin)  # (B, 1, T, R)
            q = torch.cat([q, q_r], dim=-1)  # (B, H, T, D + R)
            k = torch.cat([k, k_r.expand(-1, h, -1, -1)], dim=-1)  # (B, H, T, D + R)
        context, _ = attention(q, k, v)  # (B, H, T, D)
        return self.out_proj(context.transpose(1, 2).reshape(b, t, d_model))


def latent_fixture(rope):
    seed = 4709 if rope else 4708
    b, t, c, heads, latent = 2, 23, 32, 4, 12
    torch.manual_seed(seed)
    layer = LatentAttention(c, heads, latent, rope)
    x, d_out = torch.randn(b, t, c), torch.randn(b, t, c)
    tensors = {"x": x, "d_out": d_out}
    tensors.update({name: p.detach().clone() for name, p in layer.named_parameters()})
    layers = copies(layer)
    runs = {dt: run_layer(layers[dt], x, d_out, dt) for dt in layers}
    tensors.update(both(runs[torch.float32], runs[torch.float64]))
    what = (
        "multi-head latent attention: c = W_DKV(x), k = W_key(c), v = W_value(c), q = W_query(x), "
        "causal softmax(q·kᵀ/√D)·v, out_proj; nn.Linear layers with biases; grad.* for the upstream "
        "gradient d_out"
    )
    if rope:
        what += (
            "; decoupled RoPE: q_r = RoPE(W_QR(x)) per head, k_r = RoPE(W_KR(x)) shared by the "
            "heads, each R = D/2 wide, split halves, theta 10000 over R, concatenated after q and "
            "k, scores scaled by 1/√(D + R)"
        )
    sizes = dict(B=b, T=t, C=c, H=heads, D=c // heads, L=latent)
    if rope:
        sizes["R"] = c // heads // 2
    name = "s7_latent_rope.safetensors" if rope else "s7_latent.safetensors"
    save(name, tensors, metadata(what, seed, **sizes))


def main():
    torch.set_num_threads(1)
    check_gqa_reference()
    OUT.mkdir(parents=True, exist_ok=True)
    flash_fixture()
    gqa_fixture()
    latent_fixture(rope=False)
    latent_fixture(rope=True)


if __name__ == "__main__":
    main()
