"""``torch_tpu.ops.splash_attention``: TorchTPU's ``splash_sdpa``, attention with a sliding-window mask and GQA.

``splash_sdpa(q, k, v, *, scale=None, is_causal=True, local_window_size=None, enable_gqa=False, ...)`` computes
what ``F.scaled_dot_product_attention`` computes with TorchTPU's splash masks:

- ``local_window_size=w``: query ``i`` attends keys ``i - w .. i`` (a causal sliding window: the current token and
  the ``w`` before it; Gemma's sliding layers pass ``sliding_window - 1``); ``is_causal`` is then implied;
- otherwise ``is_causal=True``: keys ``0 .. i``; ``is_causal=False``: every key.

``q`` is (batch, heads, seq, head_dim); ``k`` and ``v`` have ``heads`` or a divisor of it (``enable_gqa=True``, which
must match: ValueError otherwise, as TorchTPU raises). Forward and backward, eager, fused eager and
``torch.compile(backend="tpu", fullgraph=True)``: it is ``scaled_dot_product_attention`` with the window as a
boolean mask, i.e. lowered ops (the mask is built on the device from two ``arange``), one XLA program per call in
a compiled graph. The Pallas splash kernel of TorchTPU (Mosaic) is not used: it runs only on a TPU plugin, which
this package cannot test here; the block-size arguments of that kernel are accepted and have no effect.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F

__all__ = ["splash_sdpa", "sliding_window_mask"]

# The Pallas kernel's tuning arguments (TorchTPU's signature): accepted, no effect on the XLA lowering.
_KERNEL_OPTIONS = frozenset({
    "block_q", "block_kv", "block_dkv", "block_kv_compute", "block_q_dkv", "block_kv_dkv", "block_kv_dkv_compute",
    "block_q_dq", "block_kv_dq", "use_fused_bwd_kernel", "use_vmap_bwd", "q_layout", "k_layout", "v_layout",
})


def sliding_window_mask(q_len: int, kv_len: int, window: int, device: Any = None) -> torch.Tensor:
    r"""Boolean (q_len, kv_len) mask, True where query ``i`` may attend key ``j``: ``i - window <= j <= i``."""
    qi = torch.arange(q_len, device=device).unsqueeze(-1)
    kj = torch.arange(kv_len, device=device).unsqueeze(0)
    return (kj <= qi) & (kj >= qi - window)


def splash_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: Optional[float] = None,
                is_causal: bool = True, local_window_size: Optional[int] = None, enable_gqa: bool = False,
                **kernel_options: Any) -> torch.Tensor:
    r"""Scaled dot-product attention with TorchTPU's splash masks (see the module docstring)."""
    unknown = sorted(set(kernel_options) - _KERNEL_OPTIONS)
    if unknown:
        raise TypeError(f"splash_sdpa() got unexpected keyword arguments {unknown}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"splash_sdpa: {name} must be a 4-D tensor (batch, heads, seq, head_dim), got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    n_heads, n_kv_heads = q.shape[1], k.shape[1]
    if enable_gqa != (n_heads != n_kv_heads):
        raise ValueError(f"enable_gqa ({enable_gqa}) does not match inputs: n_heads={n_heads}, n_kv_heads={n_kv_heads}")
    if n_heads % n_kv_heads != 0:
        raise ValueError(f"splash_sdpa: the query heads ({n_heads}) must be a multiple of the key/value heads "
                         f"({n_kv_heads})")
    if local_window_size is not None:
        window = int(local_window_size)
        if window < 0:
            raise ValueError(f"local_window_size must be >= 0, got {local_window_size}")
        mask = sliding_window_mask(q.shape[-2], k.shape[-2], window, device=q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(is_causal), scale=scale, enable_gqa=enable_gqa)
