"""Small, deterministic plain-torch models shared by the compile tests, the op-coverage work and the benchmarks.

Nothing here depends on torch_tpu: every model runs on any device. Build them under ``torch.manual_seed`` (or pass
``seed=``) for identical weights across devices and processes.

* :class:`Qwen3Decoder` -- a Qwen3-style decoder-only transformer: RMSNorm, RoPE, grouped-query attention with
  q/k RMSNorm, SwiGLU MLP; optional static KV cache (buffers updated in place with ``index_copy_`` at a position
  tensor) for single-token decode steps.
* :class:`DiTBlock` -- a DiT / SD3-style transformer block: adaLN-Zero modulation from a conditioning vector,
  self-attention, GELU(tanh) MLP.
* :class:`UNet2D` -- a small UNet: convolutions, GroupNorm, SiLU, strided-conv downsampling, nearest upsampling,
  skip connections.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "DecoderConfig",
    "RMSNorm",
    "Qwen3Decoder",
    "DiTBlock",
    "UNet2D",
    "MLP",
    "seeded",
]


def seeded(seed: int, fn, *args, **kwargs):
    """fn(*args, **kwargs) built under torch.manual_seed(seed) (CPU generator), the global RNG state restored."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return fn(*args, **kwargs)
    finally:
        torch.random.set_rng_state(state)


class MLP(nn.Module):
    def __init__(self, d_in: int = 32, d_hidden: int = 64, d_out: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(F.relu(self.fc1(x)))))


# ---------------------------------------------------------------------------------------------------------------
# Qwen3-style decoder


@dataclass
class DecoderConfig:
    vocab: int = 256
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    intermediate: int = 128
    rope_theta: float = 10000.0
    eps: float = 1e-6
    mlp: str = "swiglu"  # "swiglu": down(silu(gate(h)) * up(h)); "gelu": down(gelu(up(h))) (exact GELU)
    tie_embeddings: bool = False  # lm_head shares the embedding's weight
    qk_norm: bool = True  # RMSNorm of each head's queries and keys (Qwen3); False as in Llama


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        var = x32.pow(2).mean(-1, keepdim=True)
        return self.weight * (x32 * torch.rsqrt(var + self.eps)).to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h, kv, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, h * hd, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, kv * hd, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, kv * hd, bias=False)
        self.o_proj = nn.Linear(h * hd, cfg.hidden, bias=False)
        self.q_norm = RMSNorm(hd, cfg.eps) if cfg.qk_norm else nn.Identity()
        self.k_norm = RMSNorm(hd, cfg.eps) if cfg.qk_norm else nn.Identity()
        self.register_buffer("k_cache", None, persistent=False)
        self.register_buffer("v_cache", None, persistent=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                positions: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        b, s, _ = x.shape
        h, kv, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        q = self.q_norm(self.q_proj(x).view(b, s, h, hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, s, kv, hd)).transpose(1, 2)
        v = self.v_proj(x).view(b, s, kv, hd).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        if self.k_cache is not None:
            # Static cache [b, kv, max_len, hd]: write this step's keys/values at `positions`, attend to all.
            self.k_cache.index_copy_(2, positions, k)
            self.v_cache.index_copy_(2, positions, v)
            k, v = self.k_cache, self.v_cache
        n = k.shape[2]
        rep = h // kv
        k = k[:, :, None].expand(b, kv, rep, n, hd).reshape(b, h, n, hd)
        v = v[:, :, None].expand(b, kv, rep, n, hd).reshape(b, h, n, hd)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h * hd)
        return self.o_proj(out)


class _DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.attn = _Attention(cfg)
        self.post_norm = RMSNorm(cfg.hidden, cfg.eps)
        if cfg.mlp not in ("swiglu", "gelu"):
            raise ValueError(f"DecoderConfig.mlp must be 'swiglu' or 'gelu', got {cfg.mlp!r}")
        self.gated = cfg.mlp == "swiglu"
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False) if self.gated else None
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x, cos, sin, mask, positions):
        x = x + self.attn(self.input_norm(x), cos, sin, mask, positions)
        h = self.post_norm(x)
        if self.gated:
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return x + self.down_proj(F.gelu(self.up_proj(h)))


class Qwen3Decoder(nn.Module):
    """``forward(input_ids [b, s], start_pos=None) -> logits [b, s, vocab]``.

    Without a KV cache the sequence attends causally to itself (prefill / training). After
    :meth:`init_kv_cache`, ``start_pos`` (a 1-element int64 tensor on the model's device) says where the ``s`` new
    tokens go in the static cache; they attend to every cache position up to their own.
    """

    def __init__(self, cfg: DecoderConfig = DecoderConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(_DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.05)

    def init_kv_cache(self, batch: int, max_len: int, device=None, dtype=torch.float32) -> None:
        cfg = self.cfg
        for i, layer in enumerate(self.layers):
            shape = (batch, cfg.kv_heads, max_len, cfg.head_dim)
            kc = torch.zeros(shape, device=device, dtype=dtype)
            vc = torch.zeros(shape, device=device, dtype=dtype)
            # Registered as buffers so .to() moves them and dynamo treats them as module state.
            layer.attn.k_cache = kc
            layer.attn.v_cache = vc

    def forward(self, input_ids: torch.Tensor, start_pos: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, s = input_ids.shape
        dev = input_ids.device
        positions = torch.arange(s, device=dev)
        if start_pos is not None:
            positions = positions + start_pos
        cache = self.layers[0].attn.k_cache
        n = cache.shape[2] if cache is not None else s
        key_pos = torch.arange(n, device=dev)
        mask = torch.where(key_pos[None, :] > positions[:, None], float("-inf"), 0.0).to(torch.float32)
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask, positions)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------------------------------------------------------
# DiT / SD3-style block


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class DiTBlock(nn.Module):
    """``forward(x [b, n, hidden], c [b, hidden]) -> [b, n, hidden]`` with adaLN-Zero-style modulation."""

    def __init__(self, hidden: int = 64, heads: int = 4, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        mh = int(hidden * mlp_ratio)
        self.fc1 = nn.Linear(hidden, mh)
        self.fc2 = nn.Linear(mh, hidden)
        self.ada = nn.Linear(hidden, 6 * hidden)

    def _attn(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        hd = c // self.heads
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (hd ** -0.5), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, c))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(F.silu(c)).chunk(6, dim=1)
        x = x + g1.unsqueeze(1) * self._attn(_modulate(self.norm1(x), sh1, sc1))
        h = self.fc2(F.gelu(self.fc1(_modulate(self.norm2(x), sh2, sc2)), approximate="tanh"))
        return x + g2.unsqueeze(1) * h


# ---------------------------------------------------------------------------------------------------------------
# UNet2D


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, groups: int = 4) -> None:
        super().__init__()
        self.n1 = nn.GroupNorm(groups, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.n2 = nn.GroupNorm(groups, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class UNet2D(nn.Module):
    """``forward(x [b, in_ch, H, W]) -> [b, out_ch, H, W]`` (H, W divisible by 4)."""

    def __init__(self, in_ch: int = 3, out_ch: int = 3, base: int = 8, groups: int = 4) -> None:
        super().__init__()
        self.conv_in = nn.Conv2d(in_ch, base, 3, padding=1)
        self.d1 = _ResBlock(base, base, groups)
        self.down1 = nn.Conv2d(base, base, 3, stride=2, padding=1)
        self.d2 = _ResBlock(base, 2 * base, groups)
        self.down2 = nn.Conv2d(2 * base, 2 * base, 3, stride=2, padding=1)
        self.mid = _ResBlock(2 * base, 2 * base, groups)
        self.up2 = nn.Conv2d(2 * base, 2 * base, 3, padding=1)
        self.u2 = _ResBlock(4 * base, 2 * base, groups)
        self.up1 = nn.Conv2d(2 * base, base, 3, padding=1)
        self.u1 = _ResBlock(2 * base, base, groups)
        self.norm_out = nn.GroupNorm(groups, base)
        self.conv_out = nn.Conv2d(base, out_ch, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h0 = self.d1(self.conv_in(x))
        h1 = self.d2(self.down1(h0))
        h = self.mid(self.down2(h1))
        h = self.up2(F.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.u2(torch.cat([h, h1], dim=1))
        h = self.up1(F.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.u1(torch.cat([h, h0], dim=1))
        return self.conv_out(F.silu(self.norm_out(h)))


# ---------------------------------------------------------------------------------------------------------------
# Qwen3-MoE-style sparse block


class _Expert(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoEBlock(nn.Module):
    """``forward(x [b, s, hidden]) -> (y [b, s, hidden], aux_loss [])``: a Qwen3-MoE-style sparse MLP block.

    RMSNorm, a softmax router, top-k experts (renormalized weights), SwiGLU experts, residual. Static shapes only:
    every expert runs on every token; each token takes its top-k experts' outputs (a gather), weighted, and the
    per-slot contributions are summed per token with ``index_add`` and ``scatter_add``. The load-balancing auxiliary
    loss counts expert choices with ``one_hot``.
    """

    def __init__(self, hidden: int = 64, experts: int = 4, top_k: int = 2, intermediate: int = 32,
                 eps: float = 1e-6) -> None:
        super().__init__()
        self.experts_n, self.top_k = experts, top_k
        self.norm = RMSNorm(hidden, eps)
        self.router = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(_Expert(hidden, intermediate) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        b, s, h = x.shape
        t = self.norm(x).reshape(b * s, h)
        n = t.shape[0]
        probs = torch.softmax(self.router(t).float(), dim=-1)
        w, idx = torch.topk(probs, self.top_k, dim=-1)
        w = (w / w.sum(dim=-1, keepdim=True)).to(x.dtype)
        outs = torch.stack([e(t) for e in self.experts])          # [E, n, h]
        tok = torch.arange(n, device=x.device)
        picked = outs[idx, tok[:, None]]                           # [n, k, h]
        contrib = (picked * w[..., None]).reshape(n * self.top_k, h)
        rows = tok.repeat_interleave(self.top_k)
        half = contrib.shape[0] // 2
        y = torch.zeros_like(t).index_add(0, rows[:half], contrib[:half])
        y = y.scatter_add(0, rows[half:, None].expand(-1, h), contrib[half:])
        mask = F.one_hot(idx, self.experts_n).sum(dim=1).float()  # [n, E] chosen experts
        aux = self.experts_n * (mask.mean(0) * probs.mean(0)).sum()
        return x + y.reshape(b, s, h), aux


__all__ += ["MoEBlock"]
